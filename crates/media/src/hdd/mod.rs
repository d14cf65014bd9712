//! A hard disk drive (see `docs/media.md`).
