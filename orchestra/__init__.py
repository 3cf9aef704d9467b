"""Forge."""
