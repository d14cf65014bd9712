"""Ordered writes over NVMe-oF (Rio against Linux FLUSH ordering and HORAE): the crash checker."""
