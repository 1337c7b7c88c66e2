"""A process that parses chunks of a results file for an import (store/importing.py):

    python -m torchmark.store.import_worker REQUESTS_FD RESPONSES_FD FILE_FD

Each request is an import_records.Chunk whose data it reads from FILE_FD (the file the
importer opened and digested), answered with its Parsed, or with ("refused", the
one-line reason) for a record that may not be stored; None asks it to exit. It imports
no torch and holds no store connection."""

from __future__ import annotations

import sys
from typing import Any

from torchmark.core.errors import UsageError
from torchmark.core.framing import recv_frame, send_frame
from torchmark.store.import_records import ChunkParser
from torchmark.store.importing import read_span

STOP = None


def serve(requests: int, responses: int, file: int) -> None:
    parse_chunk = ChunkParser()  # one worker, one file
    while True:
        chunk = recv_frame(requests)
        if chunk is STOP:
            return
        chunk.data = read_span(file, chunk.offset, chunk.length)
        answer: Any
        try:
            answer = parse_chunk(chunk)
        except UsageError as e:
            answer = ("refused", str(e))
        send_frame(responses, answer)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
