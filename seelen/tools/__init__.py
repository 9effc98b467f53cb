"""Tools the model can call: local ones and MCP servers, behind one registry."""
