"""``KStream.print``: Kafka's ``Printed`` (where and how records are printed) and the printer
processor, ``KStreamPrint``. A debugging aid: on Spark it prints where the task runs (an executor's
Python worker), and a retried batch prints again."""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import check_name
from streams.processor import Processor
from streams.record import Record, Windowed
from streams.stateless import _row, _value_of


@dataclass(frozen=True)
class Printed:
    """Kafka's ``Printed`` for ``KStream.print``: where each record is printed (standard output, or
    a file, truncated by ``toFile`` as Kafka opens it there), its label (default: the name of the
    processor it prints from) and a ``(key, value) -> str`` mapper (default ``"key, value"``)."""
    file_path: str | None = None    # None: standard output
    label: str | None = None
    mapper: Any = None              # a Fn: a callable (key, value) -> str, or SQL giving a string
    name: str | None = None         # the printer processor's name (else KSTREAM-PRINTER-<n>)

    @staticmethod
    def toSysOut() -> "Printed":
        return Printed()

    @staticmethod
    def toFile(filePath: str) -> "Printed":
        if filePath is None:
            raise TopologyError("filePath can't be null")
        if not isinstance(filePath, str) or not filePath.strip():
            raise TopologyError("filePath can't be an empty string")
        try:
            open(filePath, "w", encoding="utf-8").close()
        except OSError as e:
            raise TopologyError(f"Unable to write stream to file at [{filePath}] {e}") from e
        return Printed(file_path=filePath)

    def withLabel(self, label: str) -> "Printed":
        if label is None:
            raise TopologyError("label can't be null")
        return replace(self, label=str(label))

    def withKeyValueMapper(self, mapper) -> "Printed":
        if mapper is None:
            raise TopologyError("mapper can't be null")
        return replace(self, mapper=Fn(mapper, "Printed key-value mapper", (2,)))

    def withName(self, name: str) -> "Printed":
        return replace(self, name=check_name(name, "Printed"))


def java_text(x) -> str:
    """A key or value as Java's ``String.valueOf`` shows it in ``print``: null, true/false, a
    ``Windowed`` key as ``[key@start/end]``."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, Windowed):
        return f"[{java_text(x.key)}@{x.start}/{x.end}]"
    return str(x)


class Print(Processor):
    """``print``, Kafka's ``KStreamPrint``: one line per record, ``[label]: key, value`` or
    ``[label]: <mapper(key, value)>``, on standard output or appended to the ``Printed.toFile``
    file (each line flushed, so what a task printed survives it). Nothing is forwarded."""
    def __init__(self, label: str, mapper: Fn | None, file_path: str | None):
        self.label, self.mapper, self.file_path = label, mapper, file_path

    def process(self, record: Record) -> None:
        key, value = record.key, _value_of(record.value)
        if self.mapper is None:
            text = f"{java_text(key)}, {java_text(value)}"
        elif self.mapper.is_sql:
            text = java_text(self.mapper.evaluate(_row(self, record)))
        else:
            text = java_text(self.mapper.fn(key, value))
        line = f"[{self.label}]: {text}\n"
        if self.file_path is None:
            sys.stdout.write(line)
            sys.stdout.flush()
        else:
            with open(self.file_path, "a", encoding="utf-8") as f:
                f.write(line)
