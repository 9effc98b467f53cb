"""The agent: one turn of conversation (recall, prompt, model, tools) as typed events."""
