"""Leduc Poker's facts in OpenSpiel: six cards, card ``c`` has rank ``c // 2`` (0=J, 1=Q,
2=K) and suit ``c % 2``; actions 0=fold, 1=call (a check when no bet is faced), 2=raise (a
bet when no bet is faced).

Example:
    >>> RANK_NAMES[card_rank(5)], FOLD, CALL, RAISE
    ('King', 0, 1, 2)
"""

GAME = "leduc_poker"
FOLD, CALL, RAISE = 0, 1, 2
JACK, QUEEN, KING = 0, 1, 2
RANK_NAMES = ("Jack", "Queen", "King")
#: The engine's ``public_card()`` before the public card is dealt.
NO_CARD = -10000


def card_rank(card: int) -> int:
    """The rank (0=J, 1=Q, 2=K) of engine card ``card`` (0..5).

    Example:
        >>> [card_rank(c) for c in range(6)]
        [0, 0, 1, 1, 2, 2]
    """
    return card // 2
