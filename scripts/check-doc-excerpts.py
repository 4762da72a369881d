#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every ```c block of the porting guide must stand verbatim in one of the
compiled example programs, so the guide cannot drift from code that builds."""
import glob
import re
import sys

guide = open("docs/porting-guide.md").read()
sources = [open(f).read() for f in sorted(glob.glob("examples/*.c"))]
blocks = re.findall(r"```c\n(.*?)```", guide, re.S)
missing = [b for b in blocks if not any(b.strip("\n") in s for s in sources)]
for b in missing:
    print("porting-guide.md: C block not found in examples/:", b.strip().splitlines()[0])
print(f"doc excerpts: {len(blocks) - len(missing)} of {len(blocks)} C blocks match examples/")
sys.exit(1 if missing else 0)
