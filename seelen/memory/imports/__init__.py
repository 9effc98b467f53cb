"""Other assistants' histories into Seelen: ChatGPT's and Claude's data exports, simonw/llm's
logs.db. One reader per format turns a file into `Conversation`s holding only what the user
saw (`conversation.py`); `source.py` reads a file and recognises its format; `writer.py`
stores the conversations with ids derived from the source's, so imports are idempotent.
"""
