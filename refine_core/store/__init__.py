"""The SQLite run database (see db.py); importing this package does not import torch."""

from refine_core.store.db import (
    DB_FILENAME,
    RunDatabase,
    RunDatabaseError,
    SchemaVersionError,
    decode_arrays,
    encode_arrays,
)
from refine_core.store.schema import SCHEMA_VERSION

__all__ = [
    "DB_FILENAME", "RunDatabase", "RunDatabaseError", "SCHEMA_VERSION", "SchemaVersionError",
    "decode_arrays", "encode_arrays",
]
