"""The open profile's one interface (`ProfileService`), implemented over the composition
root: what the chat, `ask`, the owner's socket, `memory search` and the Python API call.

- `profile.py`: the service, and its dispatch of memory calls;
- `reading.py`: the calls that read (search, sessions, profile, notes, index state);
- `writing.py`: the calls that write (remember, forget, import).
"""

from seelen.service.profile import ProfileService
from seelen.service.reading import BadInput

__all__ = ["BadInput", "ProfileService"]
