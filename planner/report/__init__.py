"""Presentation: pure functions of result models -> text (layer L5)."""
