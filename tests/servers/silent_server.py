"""An MCP server that never answers: it reads stdin until EOF and says nothing."""

import sys

for _line in sys.stdin:
    pass
