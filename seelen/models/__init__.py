"""The models: the chat model client, embedders, the local llama.cpp server, which to use."""
