"""HeadTailBuffer: bounded capture, head/tail/marker, UTF-8 boundaries."""

from __future__ import annotations

from skillruntime.core.runtime.output import HeadTailBuffer, truncation_marker


def test_output_within_limit_is_returned_whole() -> None:
    buffer = HeadTailBuffer(10)
    buffer.feed(b"0123")
    buffer.feed(b"456789")
    assert buffer.text() == ("0123456789", False)


def test_output_beyond_limit_keeps_head_and_tail_around_marker() -> None:
    buffer = HeadTailBuffer(10)
    for index in range(100):
        buffer.feed(bytes([ord("a") + index % 26]))
    text, truncated = buffer.text()
    assert truncated
    assert text.startswith("abcde")
    assert text.endswith("rstuv")
    assert truncation_marker(90) in text


def test_memory_stays_bounded_for_many_chunks() -> None:
    buffer = HeadTailBuffer(1024)
    for _ in range(10_000):
        buffer.feed(b"x" * 4096)
    assert buffer.total_bytes == 40_960_000
    assert len(buffer._tail) <= 2 * 512 + 4096
    assert len(buffer._head) == 512


def test_multibyte_character_cut_at_boundaries_is_dropped_whole() -> None:
    # "é" is two bytes; with a limit of 11 the head keeps 5 bytes and the tail 6.
    buffer = HeadTailBuffer(11)
    buffer.feed(("ab" + "é" * 20 + "cd").encode())
    text, truncated = buffer.text()
    assert truncated
    assert "\ufffd" not in text
    head, _, rest = text.partition("\n... [")
    assert head == "abé"
    tail = rest.split("] ...\n", 1)[1]
    assert tail.endswith("cd")
    assert set(tail[:-2]) == {"é"}
    dropped = int(rest.split(" bytes", 1)[0])
    assert dropped == 44 - len(head.encode()) - len(tail.encode())


def test_invalid_utf8_is_replaced_not_raised() -> None:
    buffer = HeadTailBuffer(100)
    buffer.feed(b"ok\xff\xfeok")
    assert buffer.text() == ("ok\ufffd\ufffdok", False)
