"""Error-message checks against the line a test marks with a `# L:<name>` comment."""


def line_of(path: str, marker: str) -> int:
    """The line of `path` that ends with `# L:<marker>`."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# L:{marker}"):
                return number
    raise AssertionError(marker)


def check_error(err, kind, message: str, path: str, marker: str) -> None:
    """`err` is exactly a `kind` with `message`, pointing at the marked line of `path`."""
    assert type(err) is kind, (type(err), err)
    assert err.message == message
    assert err.file == path
    assert err.line == line_of(path, marker)
    assert str(err).endswith(f":{line_of(path, marker)}: {message}")
