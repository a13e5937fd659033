"""One CSV file named as explicit slices: what the tests of ranged consumers read."""


def sliced_works(tmp_path, slices: int, lines: int) -> list[str]:
    """One CSV file of ``slices * lines`` lines ``s,j``, named as ``slices`` explicit slices of ``lines`` records."""
    path = tmp_path / "records.csv"
    path.write_text("".join(f"{s},{j}\n" for s in range(slices) for j in range(lines)))
    return [f"{path}?start={s * lines}&end={(s + 1) * lines}" for s in range(slices)]


def every_record(slices: int, lines: int) -> list[bytes]:
    """The records of ``sliced_works(tmp_path, slices, lines)``, in order."""
    return [f"{s},{j}".encode() for s in range(slices) for j in range(lines)]
