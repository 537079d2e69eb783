"""As torch/utils/cpp_extension.py, in miniature: how an extension or domain library builds against an
installed minitorch. Include and library paths come from the package's folder (include/, lib/), the ABI flag
from the compiled module (`_C._GLIBCXX_USE_CXX11_ABI`), CUDA from CUDA_HOME (or nvcc on PATH) with
TORCH_CUDA_ARCH_LIST's archs, both compilers behind a ccache found on PATH (torch 2.13's _wrap_compiler).
BuildExtension compiles with ninja: it writes build.ninja into setuptools' build_temp (depfiles `$out.d`,
deps = gcc) and runs it there, MAX_JOBS as its -j; setuptools links."""

import os
import shlex
import shutil
import subprocess

import setuptools
from setuptools.command.build_ext import build_ext

import minitorch

# the package folder that holds lib/ (the checkout's up to 2.13; the env's under scikit-build-core's redirect)
_TORCH_PATH = next((p for p in minitorch.__path__ if os.path.isdir(os.path.join(p, "lib"))),
                   os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_LIB_PATH = os.path.join(_TORCH_PATH, "lib")
COMMON_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr"]


def _find_cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else "/usr/local/cuda"
        home = home if os.path.isdir(home) else None
    return home


CUDA_HOME = _find_cuda_home()


def cuda_is_available():
    """As torch.cuda.is_available(): a CUDA build and a device to run on."""
    if not minitorch.cuda_compiled():
        return False
    try:
        minitorch.run_kernel(1)
        return True
    except RuntimeError:
        return False


def include_paths(cuda=False):
    return [os.path.join(_TORCH_PATH, "include")] + ([os.path.join(CUDA_HOME, "include")] if cuda else [])


def library_paths(cuda=False):
    return [TORCH_LIB_PATH] + ([os.path.join(CUDA_HOME, "lib64")] if cuda else [])


def CppExtension(name, sources, *args, **kwargs):
    kwargs["include_dirs"] = kwargs.get("include_dirs", []) + include_paths()
    kwargs["library_dirs"] = kwargs.get("library_dirs", []) + library_paths()
    kwargs["libraries"] = kwargs.get("libraries", []) + ["c10", "torch", "torch_python"]
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def CUDAExtension(name, sources, *args, **kwargs):
    if CUDA_HOME is None:
        raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")
    kwargs["include_dirs"] = kwargs.get("include_dirs", []) + include_paths(cuda=True)
    kwargs["library_dirs"] = kwargs.get("library_dirs", []) + library_paths(cuda=True)
    kwargs["libraries"] = kwargs.get("libraries", []) + ["c10", "torch", "torch_python", "c10_cuda", "cudart"]
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def _cuda_arch_flags():
    """-gencode flags from TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX"), else a default list."""
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "7.5;8.0;9.0").replace(" ", ";")
    flags = []
    for arch in filter(None, archs.split(";")):
        num = arch.replace("+PTX", "").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


def _wrap_compiler(compiler):
    """As torch 2.13's: the compiler (a word or a list) behind ccache (or sccache) where one is on PATH, unless
    TORCH_NO_COMPILER_WRAPPER is set."""
    compiler = [compiler] if isinstance(compiler, str) else list(compiler)
    if os.environ.get("TORCH_NO_COMPILER_WRAPPER"):
        return compiler
    wrapper = next((w for w in ("ccache", "sccache") if shutil.which(w)), None)
    return [wrapper, *compiler] if wrapper else compiler


def _write_ninja_file(path, sources, objects, cflags, post_cflags, cuda_cflags, cuda_post_cflags):
    """As _write_ninja_file: one rule per compiler, one build line per object; the file is rewritten only
    when its content changes."""
    nvcc = os.environ.get("PYTORCH_NVCC") or shlex.join(
        _wrap_compiler(os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else "nvcc"))
    lines = ["ninja_required_version = 1.3", f"cxx = {shlex.join(_wrap_compiler(os.environ.get('CXX', 'c++')))}",
             f"nvcc = {nvcc}", "",
             f"cflags = {' '.join(cflags)}", f"post_cflags = {' '.join(post_cflags)}",
             f"cuda_cflags = {' '.join(cuda_cflags)}", f"cuda_post_cflags = {' '.join(cuda_post_cflags)}", "",
             "rule compile", "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags",
             "  depfile = $out.d", "  deps = gcc", "",
             "rule cuda_compile", "  depfile = $out.d", "  deps = gcc",
             "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d $cuda_cflags "
             "-c $in -o $out $cuda_post_cflags", ""]
    for source, obj in zip(sources, objects):
        rule = "cuda_compile" if source.endswith(".cu") else "compile"
        lines.append(f"build {obj}: {rule} {os.path.abspath(source)}")
    text = "\n".join(lines) + "\n"
    if not os.path.isfile(path) or open(path).read() != text:
        with open(path, "w") as fh:
            fh.write(text)


class BuildExtension(build_ext):
    @classmethod
    def with_options(cls, **options):
        """As torch's: a subclass whose constructor takes these options (`use_ninja=False`, as torch-scatter and
        many others pass: distutils compiles each unit, every unit on every build_ext)."""
        class cls_with_options(cls):
            def __init__(self, *args, **kwargs):
                kwargs.update(options)
                super().__init__(*args, **kwargs)

        return cls_with_options

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.use_ninja = kwargs.get("use_ninja", True)

    def build_extensions(self):
        self.compiler.src_extensions += [".cu", ".cuh"]
        for ext in self.extensions:
            args = ext.extra_compile_args
            if not isinstance(args, dict):
                ext.extra_compile_args = args = {"cxx": list(args or []), "nvcc": []}
            args.setdefault("nvcc", [])
            for key in ("cxx", "nvcc"):
                args[key] += [f"-DTORCH_EXTENSION_NAME={ext.name.split('.')[-1]}",
                              f"-D_GLIBCXX_USE_CXX11_ABI={int(minitorch._C._GLIBCXX_USE_CXX11_ABI)}"]
        if self.use_ninja:
            self.compiler.compile = self._ninja_compile
        else:
            self.compiler._compile = self._single_compile(self.compiler._compile)
        build_ext.build_extensions(self)

    def _single_compile(self, original_compile):
        """As torch's unix_wrap_single_compile: one unit at a time through distutils, its compiler (or nvcc for a
        .cu) behind the wrapper, the extension's cxx or nvcc flags."""
        def compile_one(obj, src, ext, cc_args, extra_postargs, pp_opts):
            original = self.compiler.compiler_so
            cflags = list(extra_postargs["nvcc" if src.endswith(".cu") else "cxx"]
                          if isinstance(extra_postargs, dict) else extra_postargs)
            try:
                if src.endswith(".cu"):
                    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else "nvcc"
                    self.compiler.set_executable("compiler_so", _wrap_compiler(nvcc))
                    cflags = COMMON_NVCC_FLAGS + ["--compiler-options", "'-fPIC'"] + cflags + _cuda_arch_flags()
                else:
                    self.compiler.set_executable("compiler_so", _wrap_compiler(original))
                original_compile(obj, src, ext, cc_args, cflags + ["-std=c++17"], pp_opts)
            finally:
                self.compiler.set_executable("compiler_so", original)

        return compile_one

    def _ninja_compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                       extra_preargs=None, extra_postargs=None, depends=None):
        output_dir = os.path.abspath(output_dir)
        _, objects, extra_postargs, pp_opts, _ = self.compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        common = self.compiler._get_cc_args(pp_opts, debug, extra_preargs)
        cflags = [shlex.quote(f) for f in self.compiler.compiler_so[1:]] + common
        post = list(extra_postargs["cxx"]) + ["-std=c++17"]
        cuda_cflags = common + ["--compiler-options", "'-fPIC'"]
        cuda_post = list(extra_postargs["nvcc"]) + COMMON_NVCC_FLAGS + _cuda_arch_flags() + ["-std=c++17"]
        if os.environ.get("CC"):
            cuda_post += ["-ccbin", os.environ["CC"]]
        os.makedirs(output_dir, exist_ok=True)
        _write_ninja_file(os.path.join(output_dir, "build.ninja"), sources, objects, cflags, post,
                          cuda_cflags, cuda_post)
        command = ["ninja", "-v"] + (["-j", os.environ["MAX_JOBS"]] if os.environ.get("MAX_JOBS") else [])
        try:
            subprocess.run(command, cwd=output_dir, check=True)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError("Error compiling objects for extension") from exc
        return objects
