"""The thin client of a profile's owner: where it listens and who holds the profile
(`place`), finding, starting and stopping it (`connect`), and one request with its retries
(`exchange`). Standard library only, with `seelen.protocol`: a client starts in milliseconds.
"""
