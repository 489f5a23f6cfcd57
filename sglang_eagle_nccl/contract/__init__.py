"""One definition of everything that crosses a process or language boundary (variable names, the
hand-off wire, the launch directory, the start-up model of the patch manifests, the native library's
location), start-up cheap: the .pth gate and every process of an enabled launch import from here.

This file imports nothing: importing a subpackage costs nothing.
"""
