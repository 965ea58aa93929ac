"""What a replica needs: devices (CPU, GPU, TPU) and ``ResourceConfig``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self, cast

from pydantic import ConfigDict, Field, field_validator, model_validator

from fray import topology as _tpu
from fray._model import (
    Bool,
    Float,
    Int,
    Memory,
    Model,
    Name,
    Str,
    StrSeq,
    names,
    parse_memory,
    reject_reserved,
    whole,
)
from fray.errors import InvalidRequestError

GPU_TYPES: tuple[str, ...] = (
    "A10",
    "A10G",
    "A100",
    "A100-40G",
    "A100-80G",
    "B100",
    "B200",
    "GB200",
    "GB300",
    "GH200",
    "H100",
    "H200",
    "L4",
    "L40",
    "L40S",
    "MI300X",
    "RTX4090",
    "T4",
    "V100",
    "auto",
)
"""GPU variants ``GpuConfig`` accepts (case-insensitive); ``auto`` takes whatever GPU the
backend has, ``A100`` any A100 (40 or 80 GB)."""

ANY_REGION = "*"
"""``regions=[ANY_REGION]``: run in any region, on every backend (``regions=None`` means the
same except on Iris, where a child job then inherits its parent's region)."""


class CpuConfig(Model):
    """A CPU-only task."""

    kind: Literal["cpu"] = "cpu"
    variant: Literal["cpu"] = "cpu"

    def chip_count(self) -> int:
        """Accelerator chips per replica: none."""
        return 0

    def device_flops(self, dtype: str = "bf16") -> float:
        """Peak FLOP/s of one chip: a CPU has no entry in the table.

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError(f"no peak FLOP/s figure for CPUs (dtype {dtype!r})")

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a CPU task gets unless the request sets them."""
        return {"JAX_PLATFORMS": "cpu"}


class _Accelerator(Model):
    """What a GPU and a TPU config share: the peak FLOP/s of their chips."""

    variant: str

    def chip_count(self) -> int:
        """Chips per replica."""
        raise NotImplementedError

    def device_flops(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s of one chip (a GPU, a TPU chip) at ``dtype`` (see
        ``fray.device_flops``).

        Raises:
            ValueError: The table has no figure for this device and dtype.
        """
        from fray.device_flops import device_flops

        flops = device_flops(self.variant, dtype)
        if flops is None:
            raise ValueError(f"no peak FLOP/s figure for {self.variant} at dtype {dtype!r}")
        return flops

    def total_flops(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s of one replica's chips."""
        return self.device_flops(dtype) * self.chip_count()


class GpuConfig(_Accelerator):
    """``count`` GPUs per replica of ``variant``, one of :data:`GPU_TYPES`."""

    variant: Str
    kind: Literal["gpu"] = "gpu"
    count: Int = Field(default=1, ge=1)

    @field_validator("variant")
    @classmethod
    def _check_variant(cls, value: str) -> str:
        if value in GPU_TYPES:
            return value
        by_upper = {g.upper(): g for g in GPU_TYPES}
        if value.upper() in by_upper:
            return by_upper[value.upper()]
        import difflib  # only on this error path: keeps `import fray` cheap

        close = difflib.get_close_matches(value.upper(), list(by_upper), n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(by_upper[c] for c in close)}?" if close else ""
        raise ValueError(f"known GPU types are {', '.join(GPU_TYPES)}.{hint}")

    def chip_count(self) -> int:
        """GPUs per replica."""
        return self.count

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a GPU task gets unless the request sets them (empty: JAX picks)."""
        return {"JAX_PLATFORMS": ""}


class TpuConfig(_Accelerator):
    """One TPU slice type, ``variant`` (``"v5p-256"``; ``v5e-N`` is read as ``v5litepod-N``);
    multislice requests repeat it (see ``ResourceConfig.with_tpu``). ``topology`` is an
    optional physical topology string (``"4x4x8"``), passed through to backends."""

    variant: str
    kind: Literal["tpu"] = "tpu"
    topology: Name | None = None

    @field_validator("variant", mode="before")
    @classmethod
    def _check_variant(cls, value: Any) -> str:
        try:
            return _tpu.canonical_tpu_name(value)
        except _tpu.UnknownTpuTypeError as err:
            raise ValueError(str(err)) from None

    @property
    def topology_info(self) -> _tpu.TpuTopology:
        """The slice's entry in the topology database."""
        return _tpu.get_tpu_topology(self.variant)

    def chip_count(self) -> int:
        """TPU chips per VM (one replica runs per VM)."""
        return self.topology_info.chips_per_vm

    def vm_count(self) -> int:
        """VMs (replicas) per slice."""
        return self.topology_info.vm_count

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a TPU task gets unless the request sets them."""
        return self.topology_info.default_env_vars()


_CPU_NOMINAL_FLOPS = 100e9  # what MFU code divides by for CPU work (the predecessor's figure)
_UNITS = (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10))


def _scaled_size(size: str, factor: float) -> str:
    """``size`` times ``factor``, written with the largest binary unit it reaches."""
    if factor == 1.0:
        return size
    scaled = parse_memory(size) * factor
    for suffix, unit in _UNITS:
        if scaled >= unit:
            value = scaled / unit
            if abs(value - round(value)) < 1e-9:
                return f"{round(value)}{suffix}"
            return f"{value:g}{suffix}"
    return str(round(scaled))


DeviceConfig = Annotated[CpuConfig | GpuConfig | TpuConfig, Field(discriminator="kind")]


DEFAULT_DISK = "64g"
"""``ResourceConfig.disk`` unless given."""
TPU_DEFAULT_DISK = "50g"
"""``ResourceConfig.with_tpu``'s ``disk`` unless given."""


def has_default_disk(resources: ResourceConfig) -> bool:
    """Whether ``disk`` is what a config gets unless it says otherwise: ``DEFAULT_DISK``, or
    for a TPU also ``with_tpu``'s ``TPU_DEFAULT_DISK``."""
    defaults = [DEFAULT_DISK]
    if isinstance(resources.device, TpuConfig):
        defaults.append(TPU_DEFAULT_DISK)
    return resources.disk_bytes in {parse_memory(d) for d in defaults}


class ResourceConfig(Model):
    """What each replica of a job (or each actor) needs. It may be changed after it is made
    (as the predecessor's dataclass could); each assignment is validated.

    Attributes:
        cpu: CPU cores per replica (fractions allowed).
        ram: Memory per replica, e.g. ``"16g"`` (see :func:`parse_memory`); ``disk`` alike.
        preemptible: ``False`` pins the work to non-preemptible capacity (Ray: the head node).
        regions: Regions the work may run in; ``None`` for anywhere (on Iris: the parent
            job's region), ``[ANY_REGION]`` for anywhere on every backend.
        target_cluster: The cluster to run on, where a backend fronts several (Iris).
        replicas: Replicas per job (TPU: VMs per slice × slices; the default, 1, is one slice).
        device_alternatives: Other acceptable device variants, the same shape as ``device``.
        image: The container image tasks run in (Iris); ``container_profile`` alike.
    """

    model_config = ConfigDict(frozen=False, validate_assignment=True)

    cpu: Float = Field(default=1, ge=0)
    ram: Memory = "4g"
    disk: Memory = DEFAULT_DISK
    device: DeviceConfig = Field(default_factory=CpuConfig)
    preemptible: Bool = True
    regions: StrSeq | None = None
    zone: Name | None = None
    target_cluster: Name | None = None
    replicas: Int = Field(default=1, ge=1)
    device_alternatives: StrSeq | None = None
    image: Name | None = None
    container_profile: Name | None = None

    @field_validator("cpu")
    @classmethod
    def _finite_cpu(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("cpu must be a finite number of cores, e.g. 1 or 0.5")
        return value

    @field_validator("regions", "device_alternatives", mode="before")
    @classmethod
    def _non_empty_names(cls, value: Any) -> Any:
        listed = names(value, "names")
        if listed == ():
            raise ValueError("give at least one name, or None")
        return listed

    @field_validator("regions")
    @classmethod
    def _any_region_alone(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and ANY_REGION in value and len(value) > 1:
            raise ValueError(f"{ANY_REGION!r} (ANY_REGION) means any region: give it alone")
        return value

    @model_validator(mode="after")
    def _check_device_shape(self) -> Self:
        device = self.device
        if isinstance(device, TpuConfig):
            vms = device.vm_count()
            if self.replicas == 1 and vms > 1:
                object.__setattr__(self, "replicas", vms)  # the default: one slice, one per VM
            if self.replicas % vms:
                raise ValueError(
                    f"replicas={self.replicas} must be a multiple of the {vms} VMs per "
                    f"{device.variant} slice (replicas = slices x VMs per slice)"
                )
            for alt in self.device_alternatives or ():
                try:
                    info = _tpu.get_tpu_topology(alt)
                except _tpu.UnknownTpuTypeError as err:
                    raise ValueError(f"device_alternatives: {err}") from None
                if (info.vm_count, info.chips_per_vm) != (vms, device.chip_count()):
                    raise ValueError(
                        f"device_alternatives: {alt} has {info.vm_count} VMs x "
                        f"{info.chips_per_vm} chips, but {device.variant} has {vms} x "
                        f"{device.chip_count()}; alternatives must have the same shape"
                    )
        elif isinstance(device, GpuConfig):
            for alt in self.device_alternatives or ():
                GpuConfig(variant=alt)
        elif self.device_alternatives:
            raise ValueError("device_alternatives only applies to GPU or TPU devices")
        return self

    @property
    def ram_bytes(self) -> int:
        """``ram`` in bytes."""
        return parse_memory(self.ram)

    @property
    def disk_bytes(self) -> int:
        """``disk`` in bytes."""
        return parse_memory(self.disk)

    @property
    def slice_count(self) -> int:
        """TPU slices this config asks for (1 for non-TPU devices)."""
        if isinstance(self.device, TpuConfig):
            return self.replicas // self.device.vm_count()
        return 1

    def chip_count(self) -> int:
        """Accelerator chips over all replicas."""
        return self.device.chip_count() * self.replicas

    def device_flops(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s of one chip of ``device`` (for MFU): ``NotImplementedError``
        for a CPU, ``ValueError`` where the table has no figure."""

        return self.device.device_flops(dtype)

    def total_flops(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s over all replicas' chips; a nominal 100 GFLOP/s for CPU work."""
        if isinstance(self.device, CpuConfig):
            return _CPU_NOMINAL_FLOPS
        return self.device_flops(dtype) * self.chip_count()

    def scale(
        self,
        factor: float | None = None,
        /,
        *,
        cpu: float | None = None,
        ram: float | None = None,
        disk: float | None = None,
    ) -> ResourceConfig:
        """A copy with ``cpu``, ``ram`` and ``disk`` multiplied: all three by ``factor``, or
        each by its own keyword (finite numbers >= 0, not both forms); sizes keep a compact
        unit: ``ResourceConfig(ram="3g").scale(ram=1.5).ram == "4.5g"``."""
        given = {"cpu": cpu, "ram": ram, "disk": disk}
        if factor is not None and any(v is not None for v in given.values()):
            raise InvalidRequestError.for_field(
                "ResourceConfig.scale", factor, "give one factor, or cpu/ram/disk factors, not both"
            )
        factors: dict[str, float] = {}
        for name, value in given.items():
            chosen = factor if factor is not None else value
            chosen = 1.0 if chosen is None else chosen
            if (
                isinstance(chosen, bool)
                or not isinstance(chosen, int | float)
                or not 0 <= chosen < math.inf
            ):
                raise InvalidRequestError.for_field(
                    f"ResourceConfig.scale.{name}", chosen, "must be a finite number >= 0"
                )
            factors[name] = float(chosen)
        return self.model_copy(
            update={
                "cpu": self.cpu * factors["cpu"],
                "ram": _scaled_size(self.ram, factors["ram"]),
                "disk": _scaled_size(self.disk, factors["disk"]),
            }
        )

    @classmethod
    def with_tpu(
        cls, tpu_type: str | Sequence[str], *, slice_count: int = 1, **kwargs: Any
    ) -> ResourceConfig:
        """A TPU gang: ``slice_count`` slices of ``tpu_type`` (or of the first of a list of
        types, the rest acceptable alternatives of the same shape), one replica per VM.
        ``kwargs`` are other fields; ``cpu`` and ``ram`` default to half the family's host VM
        (``fray.topology.TPU_HOST_RESOURCES``), ``disk`` to ``"50g"``."""

        reject_reserved(
            "with_tpu",
            kwargs,
            {"device": "pass tpu_type", "replicas": "pass slice_count (replicas = VMs x slices)"},
        )
        if isinstance(tpu_type, str):
            types = [tpu_type]
        elif isinstance(tpu_type, Iterable) and not isinstance(tpu_type, bytes | Mapping):
            types = list(cast(Iterable[Any], tpu_type))
            if not types:
                raise InvalidRequestError.for_field(
                    "ResourceConfig.with_tpu.tpu_type", tpu_type, "give at least one TPU type"
                )
        else:
            raise InvalidRequestError.for_field(
                "ResourceConfig.with_tpu.tpu_type",
                tpu_type,
                "give a TPU type such as 'v5p-8', or a list of acceptable ones",
            )
        if not whole(slice_count, 1):
            raise InvalidRequestError.for_field(
                "ResourceConfig.with_tpu.slice_count", slice_count, "must be an integer >= 1"
            )
        device = TpuConfig(variant=types[0])
        cpu, ram = _tpu.tpu_host_defaults(device.variant)
        kwargs.setdefault("cpu", cpu)
        kwargs.setdefault("ram", ram)
        kwargs.setdefault("disk", TPU_DEFAULT_DISK)
        if len(types) > 1:
            kwargs.setdefault("device_alternatives", tuple(types[1:]))
        return cls(device=device, replicas=slice_count * device.vm_count(), **kwargs)

    @classmethod
    def with_gpu(cls, gpu_type: str = "auto", count: int = 1, **kwargs: Any) -> ResourceConfig:
        """``count`` GPUs of ``gpu_type`` per replica."""
        reject_reserved("with_gpu", kwargs, {"device": "pass gpu_type and count"})
        return cls(device=GpuConfig(variant=gpu_type, count=count), **kwargs)

    @classmethod
    def with_cpu(cls, **kwargs: Any) -> ResourceConfig:
        """A CPU-only config; ``kwargs`` are ``ResourceConfig`` fields."""
        reject_reserved("with_cpu", kwargs, {"device": "use ResourceConfig(device=...)"})
        return cls(device=CpuConfig(), **kwargs)
