"""What an execution process can reach: nothing of the node's secrets (node/daemon/sandbox.py).

A job's native code runs in the execution process, so a codegen bug a job can trigger must
not turn into key theft. On Linux:

- The daemon forgets its secrets once its config holds them (`forget_secrets`): the key
  passphrase and the chain private key leave its environment, and their bytes in the
  initial environment block (what /proc/PID/environ shows) are overwritten, so no child
  inherits them. The daemon also makes itself non-dumpable (`make_undumpable`): its /proc
  files (memory, environment) are then root's, out of reach of a process of its own user.
- The execution process, once it has imported what it runs, confines itself (`confine`):
  - run as root, it becomes `nobody` (its groups dropped), so DAC keeps it from the key file
    (mode 0600) and everything else of root's; where `nobody` could not read the Python
    installation (one under /root, say) it stays uid 0 but drops every capability, so it
    cannot load kernel modules, trace other processes or pass permission checks it does not
    own its way through;
  - with Landlock (Linux 5.13 and later) it restricts itself for good to reading the Python
    installation and vxla's own packages, reading and writing its compile cache (handed to
    it as an open directory), and a few device and CPU files; no other file, directory,
    /proc of another process, TCP connection (Landlock ABI 4 and later) or signal to a
    process outside its domain (ABI 6 and later) is allowed.
  It reports what holds (`Confinement`), which the daemon logs and /readyz shows.

Without Landlock (older kernels, other systems) a node run as a plain user keeps only the
first: its execution process can still open any file that user can, the key file among them
(docs/threat-model.md). The Landlock calls are three system calls, made here through ctypes:
no maintained Python binding of them exists.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import resource
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from node.daemon.config import CHAIN_KEY_ENV, PASSPHRASE_ENV

SECRET_VARIABLES = (PASSPHRASE_ENV, CHAIN_KEY_ENV)
# The user an execution process of a node run as root becomes.
EXECUTION_USER = "nobody"

# <linux/prctl.h>
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
# <asm/unistd.h>: the same numbers on every architecture (added after the unified table).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
# <linux/landlock.h>
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1
# The file rights (the only ones a rule on a file, not a directory, may allow).
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ = _FS_READ_FILE | _FS_READ_DIR
_READ_WRITE = _READ | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_DIR | _FS_MAKE_REG | _FS_REFER | _FS_TRUNCATE
# Files outside the Python installation the execution process reads while it runs jobs.
_SYSTEM_READS = ("/proc/cpuinfo", "/sys/devices/system/cpu", "/dev/null", "/dev/urandom", "/etc/os-release", "/usr/lib/os-release")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Confinement:
    """What holds in an execution process: its user, the Landlock ABI it restricted itself
    with (0: none), and what that ruleset covers."""

    uid: int
    gid: int
    no_capabilities: bool
    landlock_abi: int
    files_restricted: bool
    network_denied: bool
    signals_scoped: bool
    readable: tuple[str, ...]
    executable: tuple[str, ...] = ()  # programs it may start (a drawing process's dot)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> Confinement:
        return Confinement(**{**data, "readable": tuple(data.get("readable", ())), "executable": tuple(data.get("executable", ()))})

    def describe(self, what: str = "execution processes", reach: str = "the Python installation and the compile cache") -> str:
        user = ("root without capabilities" if self.no_capabilities else "root") if self.uid == 0 else f"uid {self.uid}"
        if not self.landlock_abi:
            return f"{what} run as {user}, without Landlock (the kernel has none): they can open what {user} can"
        extra = ", no TCP" if self.network_denied else ""
        extra += ", no signals outside" if self.signals_scoped else ""
        return f"{what} run as {user}, confined by Landlock ABI {self.landlock_abi} to {reach}{extra}"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def forget_secrets(names: tuple[str, ...] = SECRET_VARIABLES) -> list[str]:
    """Removes each named variable from this process's environment, after overwriting its
    value where libc's environment holds it (for a variable set when the process started,
    the initial environment block that /proc/PID/environ shows). Returns the names removed.
    Call it once the values are read: no child started afterwards inherits them."""
    removed = []
    libc = _libc() if sys.platform.startswith("linux") else None
    for name in names:
        if name not in os.environ:
            continue
        if libc is not None:
            libc.getenv.restype = ctypes.c_void_p
            address = libc.getenv(name.encode())
            if address:
                ctypes.memset(address, ord("x"), len(ctypes.string_at(address)))
        del os.environ[name]  # unsetenv as well
        removed.append(name)
    return removed


def make_undumpable() -> bool:
    """Makes this process non-dumpable (Linux): its /proc files become root's, so a process of
    the same user (an execution process) cannot read its memory or environment. Returns
    whether that held."""
    if not sys.platform.startswith("linux"):
        return False
    return _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def execution_user() -> tuple[int, int] | None:
    """The (uid, gid) an execution process becomes: `nobody`'s when this process is root and
    `nobody` can read the Python installation and vxla's packages; else None (it keeps this
    process's user, and as root drops its capabilities instead)."""
    if os.geteuid() != 0 or not all(_readable_by_others(root) for root in readable_roots()):
        return None
    try:
        entry = pwd.getpwnam(EXECUTION_USER)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _readable_by_others(directory: str) -> bool:
    """Whether a user with no rights of its own can list `directory` and reach it (every
    directory above it searchable by others)."""
    path = Path(directory)
    try:
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in (path, *path.parents))
    except OSError:
        return False


def hand_over(directory: Path, user: tuple[int, int] | None) -> None:
    """Makes `directory` (the compile cache) and everything in it the execution user's, so
    that a process of that user can write it."""
    directory.mkdir(parents=True, exist_ok=True)
    if user is None:
        return
    uid, gid = user
    for path in (directory, *directory.rglob("*")):
        os.chown(path, uid, gid, follow_symlinks=False)


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 without Landlock."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def readable_roots() -> list[str]:
    """What an execution process reads: the Python installation (prefixes, site-packages)
    and vxla's own packages (an editable install keeps them in its checkout)."""
    import attest
    import compiler
    import core
    import node

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for package in (core, attest, compiler, node):
        roots.update(package.__path__)
    return sorted(root for root in roots if os.path.isdir(root))


def confine(
    cache_fd: int | None, user: tuple[int, int] | None, reads: tuple[str, ...] = (), executables: tuple[str, ...] = ()
) -> Confinement:
    """Confines this process for good (the module docstring): becomes `user` if given, then
    restricts itself with Landlock where the kernel has it, allowing reads of
    `readable_roots()`, of `reads` and of the system files it needs, reads and writes of the
    directory open at `cache_fd`, and starting the programs `executables` (each with its ELF
    interpreter: `executable_files`). Call it after every import the process will need."""
    readable = (*readable_roots(), *reads)
    if user is not None:
        uid, gid = user
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    elif os.geteuid() == 0 and sys.platform.startswith("linux"):
        _drop_capabilities()
    no_capabilities = _capabilities_dropped()
    abi = landlock_abi()
    if not abi:
        return Confinement(os.getuid(), os.getgid(), no_capabilities, 0, False, False, False, readable, executables)
    libc = _libc()
    # Every right this ABI knows is handled (so denied unless a rule allows it).
    handled = _READ_WRITE | _FS_EXECUTE | (_FS_IOCTL_DEV if abi >= 5 else 0)
    if abi < 3:
        handled &= ~_FS_TRUNCATE
    if abi < 2:
        handled &= ~_FS_REFER
    attr = _RulesetAttr(handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path in (*readable, *_SYSTEM_READS):
            _allow(libc, ruleset, path, _READ & handled)
        for path in executables:
            _allow(libc, ruleset, path, (_FS_EXECUTE | _FS_READ_FILE) & handled)
        if cache_fd is not None:
            _allow_fd(libc, ruleset, cache_fd, _READ_WRITE & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return Confinement(os.getuid(), os.getgid(), no_capabilities, abi, True, abi >= 4, abi >= 6, readable, executables)


def loaded_library_directories() -> tuple[str, ...]:
    """The directories of every shared library this process has mapped, links resolved, and
    the dynamic loader's cache: what a child of the same Python installation needs to read to
    start and import what this process imported (the LLVM worker processes of
    compiler/codegen/llvm_workers.py). Call it after those imports."""
    directories = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.startswith("/") and ".so" in os.path.basename(path) and os.path.exists(path):
                directories.add(os.path.dirname(os.path.realpath(path)))
    return (*sorted(directories), "/etc/ld.so.cache")


def executable_files(program: str) -> tuple[str, ...]:
    """What Landlock must let a process execute to start `program`: the program's file and
    its ELF interpreter (the dynamic loader, which the kernel opens for execution too), both
    with their links resolved (Landlock's rules name files, not the links to them)."""
    path = os.path.realpath(program)
    interpreter = _elf_interpreter(path)
    return (path, os.path.realpath(interpreter)) if interpreter else (path,)


def _elf_interpreter(path: str) -> str | None:
    """The PT_INTERP path of a 64-bit ELF file; None for a static program or another format."""
    try:
        with open(path, "rb") as program:
            header = program.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2:
                return None
            order = "<" if header[5] == 1 else ">"
            table, entry_size, entries = struct.unpack_from(order + "Q", header, 0x20)[0], *struct.unpack_from(order + "HH", header, 0x36)
            for number in range(entries):
                program.seek(table + number * entry_size)
                kind, _, offset, _, _, size = struct.unpack(order + "IIQQQQ", program.read(40))
                if kind == 3:  # PT_INTERP
                    program.seek(offset)
                    return program.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def _drop_capabilities() -> None:
    """Empties this process's effective, permitted, inheritable and ambient capabilities."""
    libc = _libc()
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), f"capset: {os.strerror(ctypes.get_errno())}")


def _capabilities_dropped() -> bool:
    """Whether this process holds no capability (its CapEff and CapPrm are empty)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return int(fields.get("CapEff", "1"), 16) == 0 and int(fields.get("CapPrm", "1"), 16) == 0


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
            return  # not on this system: nothing to allow
        raise
    try:
        _allow_fd(libc, ruleset, fd, access)
    finally:
        os.close(fd)


def _allow_fd(libc: ctypes.CDLL, ruleset: int, fd: int, access: int) -> None:
    if not stat.S_ISDIR(os.fstat(fd).st_mode):
        access &= _FILE_RIGHTS
    rule = _PathBeneathAttr(access, fd)
    if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), f"landlock_add_rule: {os.strerror(ctypes.get_errno())}")


# --- bounds of the node's child processes (execution, checking, drawing) -------------------
def cap_address_space(extra_bytes: int) -> None:
    """Caps this process's address space (RLIMIT_AS, which its children inherit) at what it
    maps now plus `extra_bytes`: called once what the process always needs is loaded, so
    the cap bounds what its work may add."""
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = size + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def end_with_the_daemon(end: Callable[[], None]) -> None:
    """Calls `end` as soon as the daemon that started this process is gone (killed with
    SIGKILL, say), from a thread of its own: an orphan must not go on with work nobody waits
    for."""
    daemon_pid = os.getppid()

    def watch() -> None:
        while os.getppid() == daemon_pid:
            time.sleep(0.2)
        end()

    threading.Thread(target=watch, name="vxla-daemon-watch", daemon=True).start()
