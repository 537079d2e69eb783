"""As PyTorch's tools/native_aot/build_stage2.py: the post-install step of a CUDA build. scikit-build-core
has no post-build hook, so `spin develop` runs this after pip (a raw `pip install -e .` does not): export the
kernels (here: generate them), relink c10_cuda in build/ with them embedded (PyTorch: torch_cuda), and copy
the relinked library over the installed one, found through the compiled _C (the redirect install keeps
compiled files in site-packages). Skips when TORCH_NATIVE_AOT=0 (or NATIVE_AOT=0) or without CUDA."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
KERNELS = 3


def _report(msg):
    print("-- native-AOT stage 2: {}".format(msg), flush=True)


def _probe(code):
    """Run code in the installed package, from HERE (not the checkout: `python -c` puts cwd on sys.path)."""
    done = subprocess.run([sys.executable, "-c", "import minitorch; " + code], capture_output=True, text=True, cwd=HERE)
    return done.stdout.strip()


def cached(name):
    """A CMake cache entry of build/ (None without one)."""
    try:
        with open(os.path.join(REPO, "build", "CMakeCache.txt")) as f:
            return next((line.split("=", 1)[1].strip() for line in f if line.startswith(name + ":")), None)
    except OSError:
        return None


def should_run():
    if (os.getenv("TORCH_NATIVE_AOT") or os.getenv("NATIVE_AOT") or cached("TORCH_NATIVE_AOT")) == "0":
        _report("disabled (TORCH_NATIVE_AOT=0)")
        return False
    answer = _probe("print('PROBE_OK' if minitorch.cuda_compiled() else 'PROBE_NO')")
    if answer != "PROBE_OK":
        _report("skipped (minitorch built without CUDA)" if answer else "skipped (built minitorch not importable)")
        return False
    return True


def main():
    if not should_run():
        return 0
    build_dir = os.path.join(REPO, "build")
    _report("exporting kernels")
    os.makedirs(os.path.join(build_dir, "native_aot"), exist_ok=True)
    with open(os.path.join(build_dir, "native_aot", "aot_kernels.c"), "w") as f:
        f.write("int minitorch_aot_kernels(void) {{ return {}; }}\n".format(KERNELS))
    _report("relinking c10_cuda with embedded kernels")
    subprocess.check_call(["cmake", "--build", ".", "--target", "c10_cuda"], cwd=build_dir)
    built = os.path.join(build_dir, "lib", "libc10_cuda.so")
    installed = os.path.join(_probe("import os, importlib.util; "
                                    "print(os.path.dirname(importlib.util.find_spec('minitorch._C').origin))"), "lib")
    shutil.copy2(built, os.path.join(installed, "libc10_cuda.so"))
    _report("relinked into {}".format(installed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
