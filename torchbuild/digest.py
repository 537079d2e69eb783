"""One short hash of JSON-able data, for every stamp and key torchbuild keeps (build inputs, env
requirements, compiler detection, a matrix session's fingerprint): equal data, equal digest."""

from __future__ import annotations

import hashlib
import json


def digest(data: object, size: int = 20) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:size]
