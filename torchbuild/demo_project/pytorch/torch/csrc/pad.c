// The bytes a library of PyTorch's size carries (torchbuild.demo.Size.pad_mb): zeros from a file the build
// writes, which the assembler includes as they are.
__asm__(".section .rodata.minitorch_pad,\"a\"\n.incbin \"" PAD_FILE "\"\n.previous\n");
