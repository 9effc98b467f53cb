"""The interactive chat: the input line, slash commands, and how events and results render."""
