"""TPU support for Fray: the topology database, per-generation env defaults and (later) gang
orchestration on Ray."""
