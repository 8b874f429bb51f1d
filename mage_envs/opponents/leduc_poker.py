"""Leduc Poker archetypes (being written)."""
