"""Cloud TPU slice types: sizes, VM layout, memory and default environment; the one table
of the TPU slice types Fray schedules (standard library only, cheap to import).

Names are ``<generation>-<suffix>``: for ``v4`` and ``v5p`` the suffix counts TensorCores
(two per chip: ``v4-8`` has 4 chips), for ``v5litepod`` and ``v6e`` it counts chips.
``v5e-N`` is another spelling of ``v5litepod-N``; case and surrounding whitespace are
ignored, and lookups return the canonical name. Scheduling runs one worker per VM
(``vm_count``, ``chips_per_vm``); ``host_count`` is informational.

Example:
    >>> topo = get_tpu_topology("V5E-16")
    >>> topo.name, topo.chip_count, topo.vm_count, topo.chips_per_vm
    ('v5litepod-16', 16, 4, 4)
    >>> slices_for_replicas("v5litepod-16", 8)
    2
"""

# Import cost matters here: no ``from __future__`` import, no regular expressions, and
# ``difflib`` is imported only when an unknown name needs suggestions.
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "DEFAULT_TPU_HOST_FRACTION",
    "TPU_HBM_BYTES_PER_CHIP",
    "TPU_HOST_RESOURCES",
    "TPU_TOPOLOGIES",
    "TpuFamily",
    "TpuHostResources",
    "TpuTopology",
    "UnknownTpuTypeError",
    "canonical_tpu_name",
    "get_tpu_topology",
    "slices_for_replicas",
    "tpu_family",
    "tpu_generations",
    "tpu_hbm_bytes_per_chip",
    "tpu_hbm_capacity_bytes",
    "tpu_host_defaults",
]

# High-bandwidth memory per chip, in GiB, by generation. The key order is the
# order generations are listed in everywhere else in this module.
_HBM_PER_CHIP_GIB: dict[str, int] = {"v4": 32, "v5litepod": 16, "v5p": 95, "v6e": 32}

# XLA flag raising the scoped VMEM limit; needed for good performance on these generations.
_LIBTPU_INIT_ARGS: dict[str, str] = {
    "v5litepod": "--xla_tpu_scoped_vmem_limit_kib=50000",
    "v5p": "--xla_tpu_scoped_vmem_limit_kib=50000",
    "v6e": "--xla_tpu_scoped_vmem_limit_kib=98304",
}

# Alternative spellings of a generation prefix, mapped to the canonical prefix.
_GENERATION_ALIASES: dict[str, str] = {"v5e": "v5litepod"}


@dataclass(frozen=True, slots=True)
class TpuTopology:
    """Shape of one TPU slice type (``name`` is canonical, e.g. ``"v5litepod-16"``).

    Attributes:
        host_count: Physical hosts in one slice (informational; scheduling uses ``vm_count``).
        vm_count: VMs (workers) in one slice.
        hbm_per_chip_gib: High-bandwidth memory per chip, in GiB.
    """

    name: str
    generation: str
    chip_count: int
    host_count: int
    vm_count: int
    chips_per_vm: int
    hbm_per_chip_gib: int

    @property
    def hbm_total_gib(self) -> int:
        """Total high-bandwidth memory across the whole slice, in GiB."""
        return self.chip_count * self.hbm_per_chip_gib

    @property
    def is_multi_vm(self) -> bool:
        """Whether a slice spans more than one VM (and so needs one worker per VM)."""
        return self.vm_count > 1

    def default_env_vars(self) -> dict[str, str]:
        """The env vars a job on this slice type gets unless it sets them (a new dict):
        ``JAX_PLATFORMS=""`` (JAX picks the TPU) and, but on ``v4``, ``LIBTPU_INIT_ARGS``
        raising XLA's scoped VMEM limit."""
        env = {"JAX_PLATFORMS": ""}
        libtpu_args = _LIBTPU_INIT_ARGS.get(self.generation)
        if libtpu_args is not None:
            env["LIBTPU_INIT_ARGS"] = libtpu_args
        return env


def _build_table() -> dict[str, TpuTopology]:
    """Builds every known slice type, ordered by generation and then size."""
    table: dict[str, TpuTopology] = {}

    def add(generation: str, suffix: int, chips: int, hosts: int, vms: int) -> None:
        name = f"{generation}-{suffix}"
        table[name] = TpuTopology(
            name=name,
            generation=generation,
            chip_count=chips,
            host_count=hosts,
            vm_count=vms,
            chips_per_vm=chips // vms,
            hbm_per_chip_gib=_HBM_PER_CHIP_GIB[generation],
        )

    def add_core_counted(generation: str, suffixes: Iterable[int]) -> None:
        # v4 and v5p: the suffix counts TensorCores (two per chip). Every VM has 4
        # chips and sits on its own host.
        for suffix in suffixes:
            chips = suffix // 2
            add(generation, suffix, chips, chips // 4, chips // 4)

    def add_chip_counted(generation: str, suffixes: Iterable[int], vms_per_host: int) -> None:
        # v5litepod and v6e: the suffix counts chips. Up to 8 chips share a single VM;
        # larger slices have 4 chips per VM.
        for suffix in suffixes:
            vms = 1 if suffix <= 8 else suffix // 4
            add(generation, suffix, suffix, max(vms // vms_per_host, 1), vms)

    v4_suffixes = [8 << i for i in range(10)]  # 8 .. 4096
    add_core_counted("v4", v4_suffixes)
    add_chip_counted("v5litepod", [1 << i for i in range(9)], vms_per_host=2)  # 1 .. 256
    add_core_counted("v5p", [*v4_suffixes, 8192, 12288])
    add_chip_counted("v6e", [1, 4, 8, 16, 32, 64, 128, 256], vms_per_host=1)
    return table


TPU_TOPOLOGIES: Mapping[str, TpuTopology] = MappingProxyType(_build_table())
"""Every known TPU slice type by canonical name (read-only), by generation and then size;
aliases (``v5e-16``) are not keys: :func:`get_tpu_topology` reads them."""

_GENERATIONS: tuple[str, ...] = tuple(_HBM_PER_CHIP_GIB)


def tpu_generations() -> tuple[str, ...]:
    """The known TPU generations, oldest first: ``("v4", "v5litepod", "v5p", "v6e")``."""
    return _GENERATIONS


class UnknownTpuTypeError(ValueError):
    """Raised when a TPU slice type ``name`` (as given) is not in the table (or is not a
    string); ``suggestions`` are up to three known names close to it, best first."""

    name: object
    suggestions: tuple[str, ...]

    def __init__(self, name: object, suggestions: Iterable[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        super().__init__(self._message())

    def _message(self) -> str:
        known = f"Known types: {_known_types_summary()}."
        if not isinstance(self.name, str):
            return (
                f"TPU type must be a string such as 'v5litepod-16', got "
                f"{type(self.name).__name__} {self.name!r}. {known}"
            )
        parts = [f"Unknown TPU type {self.name!r}."]
        if len(self.suggestions) == 1:
            parts.append(f"Did you mean {self.suggestions[0]}?")
        elif self.suggestions:
            parts.append(f"Did you mean one of: {', '.join(self.suggestions)}?")
        parts.append(known)
        return " ".join(parts)

    def __reduce__(self) -> tuple[type["UnknownTpuTypeError"], tuple[object, tuple[str, ...]]]:
        # Rebuild from the attributes so the error survives pickling across processes.
        return (type(self), (self.name, self.suggestions))


def _known_types_summary() -> str:
    """Describes the known names as per-generation ranges, for error messages."""
    ranges: list[str] = []
    for generation in _GENERATIONS:
        names = [n for n, t in TPU_TOPOLOGIES.items() if t.generation == generation]
        text = f"{names[0]}..{names[-1]}"
        aliases = [a for a, g in _GENERATION_ALIASES.items() if g == generation]
        if aliases:
            text += " (" + ", ".join(f"alias {a}-N" for a in aliases) + ")"
        ranges.append(text)
    return ", ".join(ranges)


def _normalise(name: str) -> str:
    """Lower-cases, strips and applies generation aliases, without checking the table."""
    key = name.strip().lower()
    generation, sep, suffix = key.partition("-")
    if sep and generation in _GENERATION_ALIASES:
        key = f"{_GENERATION_ALIASES[generation]}-{suffix}"
    return key


def _suggest(key: str, limit: int = 3) -> tuple[str, ...]:
    """Up to ``limit`` known names close to ``key``: the nearest sizes of its generation
    (by ratio) first, then names spelt alike."""
    import difflib  # Only needed on the error path; keep module import cheap.

    picks: list[str] = []
    generation, sep, suffix = key.rpartition("-")
    if sep and suffix.isdigit() and generation in _GENERATIONS:
        wanted = max(int(suffix), 1)
        same_generation = [t for t in TPU_TOPOLOGIES.values() if t.generation == generation]

        def distance(topology: TpuTopology) -> tuple[float, str]:
            size = int(topology.name.rpartition("-")[2])
            return (max(size, wanted) / min(size, wanted), topology.name)

        same_generation.sort(key=distance)
        picks.extend(t.name for t in same_generation[:2])
    for match in difflib.get_close_matches(key, list(TPU_TOPOLOGIES), n=limit, cutoff=0.6):
        if match not in picks:
            picks.append(match)
    return tuple(picks[:limit])


def canonical_tpu_name(name: str) -> str:
    """The canonical name of a slice type: ``" V5E-16"`` → ``"v5litepod-16"``.

    Raises:
        UnknownTpuTypeError: Not a string or not a known type (naming close matches).
    """
    if not isinstance(name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UnknownTpuTypeError(name)
    key = _normalise(name)
    if key not in TPU_TOPOLOGIES:
        raise UnknownTpuTypeError(name, _suggest(key))
    return key


def get_tpu_topology(name: str) -> TpuTopology:
    """The shape of a slice type, named as :func:`canonical_tpu_name` reads it.

    Raises:
        UnknownTpuTypeError: Not a string or not a known type.
    """
    return TPU_TOPOLOGIES[canonical_tpu_name(name)]


def slices_for_replicas(name: str, replicas: int) -> int:
    """How many slices of ``name`` run ``replicas`` workers, one per VM.

    Raises:
        UnknownTpuTypeError: ``name`` is not a known slice type.
        TypeError: ``replicas`` is not an ``int``.
        ValueError: ``replicas`` is not a positive multiple of ``vm_count``.
    """

    topology = get_tpu_topology(name)
    if isinstance(replicas, bool) or not isinstance(replicas, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"replicas must be an int, got {type(replicas).__name__} {replicas!r}")
    vms = topology.vm_count
    if replicas <= 0 or replicas % vms:
        unit = "VM" if vms == 1 else "VMs"
        examples = ", ".join(str(vms * k) for k in (1, 2, 3))
        raise ValueError(
            f"replicas must be a multiple of {vms} {unit} per slice of {topology.name} "
            f"(a positive number such as {examples}); got {replicas}"
        )
    return replicas // vms


# ---------------------------------------------------------------------------------------------
# Host VMs and HBM by family (the names the predecessor's 0.2.227 line uses)

TpuFamily = Literal["v4", "v5e", "v5p", "v6e"]
"""A TPU family as capacity tables name it: ``v5e`` is the ``v5litepod`` generation."""

_FAMILY_OF_GENERATION: dict[str, TpuFamily] = {
    "v4": "v4",
    "v5litepod": "v5e",
    "v5p": "v5p",
    "v6e": "v6e",
}

TPU_HBM_BYTES_PER_CHIP: Mapping[str, int] = MappingProxyType(
    {_FAMILY_OF_GENERATION[g]: gib << 30 for g, gib in _HBM_PER_CHIP_GIB.items()}
)
"""HBM per chip in bytes, by family (Google Cloud's TPU specifications)."""


@dataclass(frozen=True, slots=True)
class TpuHostResources:
    """The CPU cores (``cpu``) and RAM in GB (``ram_gb``) of one TPU host VM of a family."""

    cpu: int
    ram_gb: int


TPU_HOST_RESOURCES: Mapping[str, TpuHostResources] = MappingProxyType(
    {
        "v4": TpuHostResources(cpu=240, ram_gb=400),
        "v5e": TpuHostResources(cpu=112, ram_gb=192),
        "v5p": TpuHostResources(cpu=208, ram_gb=448),
        "v6e": TpuHostResources(cpu=180, ram_gb=720),
    }
)
"""The host VM of each family, as the clusters Marin runs on size them."""

DEFAULT_TPU_HOST_FRACTION = 0.5
"""The share of a TPU host VM that ``ResourceConfig.with_tpu`` asks for by default: enough
RAM for checkpoint saves, with room left for CPU tasks on the same host."""


def tpu_family(tpu_type: str) -> TpuFamily:
    """The family of a TPU slice type (``"v5litepod-16"`` → ``"v5e"``).

    Raises:
        UnknownTpuTypeError: ``tpu_type`` is not a known slice type (a ``ValueError``).
    """
    return _FAMILY_OF_GENERATION[get_tpu_topology(tpu_type).generation]


def tpu_hbm_bytes_per_chip(family: str) -> int:
    """HBM of one chip of ``family``, in bytes.

    Raises:
        ValueError: Not a known family.
    """
    hbm = TPU_HBM_BYTES_PER_CHIP.get(family)
    if hbm is None:
        raise ValueError(
            f"unknown TPU family {family!r}; known: {', '.join(TPU_HBM_BYTES_PER_CHIP)}"
        )
    return hbm


def tpu_hbm_capacity_bytes(tpu_type: str) -> int:
    """HBM of a whole slice of ``tpu_type``, in bytes."""
    return get_tpu_topology(tpu_type).hbm_total_gib << 30


def tpu_host_defaults(tpu_type: str) -> tuple[int, str]:
    """The CPU cores and RAM (e.g. ``"104g"``) ``with_tpu`` asks for per host by default:
    :data:`DEFAULT_TPU_HOST_FRACTION` of the family's host VM."""
    host = TPU_HOST_RESOURCES[tpu_family(tpu_type)]
    cpu = max(1, int(host.cpu * DEFAULT_TPU_HOST_FRACTION))
    return cpu, f"{int(host.ram_gb * DEFAULT_TPU_HOST_FRACTION)}g"
