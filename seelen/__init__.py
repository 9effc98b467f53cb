"""Seelen: a terminal chatbot with layered long-term memory."""

__version__ = "0.1.0"
