"""Layered memory: sessions, recall, persona and prompt assembly."""
