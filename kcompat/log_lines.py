"""The broker's log lines as JSON (`log.format=json`): one object a line, for log shippers.

    {"time": "2026-01-02T03:04:05.678Z", "level": "INFO", "logger": "kcompat.server",
     "message": "...", "exception": "Traceback ..."}   (exception only when there is one)

The standard library's json and logging do it in a dozen lines; a dependency for it would weigh
more than the code.
"""

from __future__ import annotations

import json
import logging
import time


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)
