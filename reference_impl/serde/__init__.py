"""The distributed serde layer's AsymK16V8 and plain FP8 serdes, with the names of upstream's
``lmcache.v1.distributed.serde`` (SPEC.md, "The serde layer")."""

from .asym_k16_v8 import (
    AsymK16V8MultiDeserializer,
    AsymK16V8MultiSerializer,
    AsymK16V8VOnlyMultiDeserializer,
    AsymK16V8VOnlyMultiSerializer,
)
from .errors import (
    DestinationTooSmallError,
    SerdeError,
    SerdeModeError,
    SerdeSlotError,
)
from .fp8 import (
    Fp8QuantizationDeserializer,
    Fp8QuantizationSerializer,
)

#: Factory names, as upstream's newer serde factory registers them: name -> (serializer,
#: deserializer).
SERDES = {
    "asym_k16_v8": (AsymK16V8MultiSerializer, AsymK16V8MultiDeserializer),
    "asym_k16_v8_v_only": (AsymK16V8VOnlyMultiSerializer, AsymK16V8VOnlyMultiDeserializer),
    "fp8": (Fp8QuantizationSerializer, Fp8QuantizationDeserializer),
}

__all__ = [
    "SERDES",
    "AsymK16V8MultiDeserializer",
    "AsymK16V8MultiSerializer",
    "AsymK16V8VOnlyMultiDeserializer",
    "AsymK16V8VOnlyMultiSerializer",
    "DestinationTooSmallError",
    "Fp8QuantizationDeserializer",
    "Fp8QuantizationSerializer",
    "SerdeError",
    "SerdeModeError",
    "SerdeSlotError",
]
