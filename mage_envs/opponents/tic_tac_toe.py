"""Tic-Tac-Toe archetypes (being written)."""
