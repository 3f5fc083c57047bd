# Prints "SONAME PATH" for every shared library that vispco's non-LibTorch dependencies need, transitively,
# except the C/C++ runtime and the sonames given as arguments (stubbed). Used by make-kit.sh.
import os
import subprocess
import sys

LIBDIRS = ('/usr/lib/x86_64-linux-gnu', '/lib/x86_64-linux-gnu')
RUNTIME = {'libc.so.6', 'libm.so.6', 'libstdc++.so.6', 'libgcc_s.so.1', 'libpthread.so.0', 'libdl.so.2',
           'librt.so.1', 'ld-linux-x86-64.so.2'}
ROOTS = ['libopencv_core.so.406', 'libopencv_imgproc.so.406', 'libopencv_imgcodecs.so.406', 'libspdlog.so.1.10',
         'libfmt.so.9', 'libsqlite3.so.0', 'libcrypto.so.3', 'libcpp-httplib.so.0.11', 'libsentencepiece.so.0',
         'libsentencepiece_train.so.0']


def needed(path):
    out = subprocess.run(['readelf', '-d', path], capture_output=True, text=True, check=True).stdout
    return [line.split('[')[1].split(']')[0] for line in out.splitlines() if '(NEEDED)' in line]


def main():
    skip = RUNTIME | set(sys.argv[1:])
    seen, todo = {}, list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen or name in skip:
            continue
        path = next((os.path.join(d, name) for d in LIBDIRS if os.path.exists(os.path.join(d, name))), None)
        if path is None:
            sys.exit(f'closure.py: {name} not found (run scripts/install-deps.sh first)')
        seen[name] = os.path.realpath(path)
        todo += needed(path)
    for name, path in sorted(seen.items()):
        print(name, path)


main()
