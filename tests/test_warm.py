"""What a long-lived process keeps of a project between runs (`orchestration.warm`): the files
naming a word are searched again only where their bytes can be other than last time, and the
answers are those of searching every file."""

from __future__ import annotations

from selfcall_audit.orchestration.warm import Warm

SOURCES = ("pkg/agent.py", "pkg/mixins.py", "pkg/notes.py")


class Files:
    """The disk, the buffers read from memory, and the files a run read."""

    def __init__(self) -> None:
        self.disk = {
            "pkg/agent.py": b"from pkg.mixins import Mixin\nclass Agent(Mixin): ...\n",
            "pkg/mixins.py": b"class Mixin: ...\n",
            "pkg/notes.py": b"# MixinTwo is another word\n",
        }
        self.memory: dict[str, bytes] = {}
        self.read: list[str] = []

    def naming(self, warm: Warm, name: str = "Mixin") -> list[str]:
        self.read = []

        def read(rel: str) -> bytes | None:
            self.read.append(rel)
            return self.memory.get(rel, self.disk.get(rel))

        return warm.naming(name, SOURCES, read, frozenset(self.memory))


def test_an_edit_searches_only_the_buffers_and_a_closed_one_answers_from_the_disk() -> None:
    warm, files = Warm(), Files()

    first = files.naming(warm)
    files.memory["pkg/agent.py"] = b"class Agent: ...\n"  # an unsaved edit drops the mixin
    edited = files.naming(warm)
    edited_read = files.read
    del files.memory["pkg/agent.py"]  # the buffer is closed: the disk's text again
    closed = files.naming(warm)

    assert (first, edited, closed) == (["pkg/agent.py", "pkg/mixins.py"], ["pkg/mixins.py"], first)
    assert edited_read == ["pkg/agent.py"]
    assert files.read == ["pkg/agent.py"]


def test_a_file_changed_on_the_disk_or_unreadable_is_searched_again() -> None:
    warm, files = Warm(), Files()
    files.disk.pop("pkg/notes.py")  # cannot be read
    files.naming(warm)

    files.disk["pkg/notes.py"] = b"Mixin\n"  # readable again: looked at again without being told
    readable = files.naming(warm)
    files.disk["pkg/mixins.py"] = b"class Base: ...\n"
    unchanged = files.naming(warm)  # the watcher has not said so: what was read is kept
    warm.changed(["pkg/mixins.py"])
    changed = files.naming(warm)

    assert readable == ["pkg/agent.py", "pkg/mixins.py", "pkg/notes.py"]
    assert unchanged == readable
    assert changed == ["pkg/agent.py", "pkg/notes.py"]
    assert files.read == list(SOURCES)
