"""Kuhn Poker's facts in OpenSpiel: cards 0=J, 1=Q, 2=K; actions 0=pass (check/fold),
1=bet (bet/call).

Example:
    >>> CARD_NAMES[KING], PASS, BET
    ('King', 0, 1)
"""

GAME = "kuhn_poker"
JACK, QUEEN, KING = 0, 1, 2
CARD_NAMES = ("Jack", "Queen", "King")
PASS, BET = 0, 1
