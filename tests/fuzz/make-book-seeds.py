#!/usr/bin/env python3
# make-book-seeds.py: writes tests/fuzz/corpus-book/ (the seeds of fuzz-book,
# patch records as fuzz-book.c describes them). Offsets follow
# src/group/book.h (version 1); rerun after a change of the layout.
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, 'corpus-book')
SLOT = 2400   # sizeof(struct cumemcap_book_slot)
HELD = 96     # offsetof(struct cumemcap_book_slot, gpu[0].held)


def rec(region, off, data=b''):
    """One patch: region, 24-bit offset, (len - 1) % 16, the bytes."""
    assert len(data) <= 16
    return bytes([region]) + struct.pack('<I', off)[:3] + bytes([max(len(data) - 1, 0)]) + data


seeds = {
    'valid': b'',
    'valid-touched': rec(3, HELD + 8, b'\x07'),
    'wrong-magic': rec(0, 0, b'X'),
    'wrong-version': rec(0, 8, struct.pack('<I', 2)),
    'wrong-kind': rec(0, 12, struct.pack('<I', 2)),
    'wrong-layout': rec(0, 40, struct.pack('<I', 33)),
    'wrong-size': rec(0, 16, struct.pack('<Q', 4096)),
    'bad-name': rec(0, 80, b'.hidden\0'),
    'unterminated-name': b''.join(rec(0, 80 + 16 * k, b'A' * 16) for k in range(4)) + rec(0, 144, b'A'),
    'bad-slots-used': rec(0, 152, struct.pack('<I', 1025)),
    'slots-used-zero': rec(0, 152, struct.pack('<I', 0)),
    'bad-tight': rec(0, 168, struct.pack('<I', 2)),
    'bad-gpu-state': rec(1, 0, struct.pack('<I', 3)),
    'gpu-no-pci': rec(1, 80 + 24, b'0000:11:00.0zzzz'),
    'bad-change-seq': rec(2, 0, struct.pack('<Q', 5)),
    'change-seq-ahead': rec(0, 176, struct.pack('<Q', 2)),
    'change-bad-gpu': rec(2, 40 + 20, struct.pack('<i', 32)),
    'change-gpu-minus-one': rec(2, 40 + 20, struct.pack('<i', -1)),
    'slot-bad-state': rec(4, 0, struct.pack('<I', 2)),
    'slot-live-past-used': rec(4, 5, struct.pack('<I', 1)),
    'cut-header': rec(5, 100),
    'cut-one-short': rec(5, 2465791),
    'held-max': rec(3, HELD, b'\xff' * 8) + rec(3, SLOT + HELD, b'\xff' * 8),
}
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
