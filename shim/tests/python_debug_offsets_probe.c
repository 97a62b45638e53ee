/* Prints where each field shim/src/python/debug_offsets.rs reads sits in _Py_DebugOffsets, as
 * CPython's own headers give it, one "name value" per line. Compiled by that file's test against
 * each installed 3.13+: cc -I<include> -I<include>/internal python_debug_offsets_probe.c */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030e0000
#include "internal/pycore_debug_offsets.h"
#endif

#define P(name, field) printf("%s %zu\n", name, offsetof(_Py_DebugOffsets, field))

int main(void) {
    P("tstate_size", thread_state.size);
    P("tstate_current_frame", thread_state.current_frame);
    P("tstate_thread_id", thread_state.thread_id);
    P("frame_size", interpreter_frame.size);
    P("frame_previous", interpreter_frame.previous);
    P("frame_executable", interpreter_frame.executable);
    P("frame_instr_ptr", interpreter_frame.instr_ptr);
    P("frame_owner", interpreter_frame.owner);
    P("code_size", code_object.size);
    P("code_filename", code_object.filename);
    P("code_qualname", code_object.qualname);
    P("code_linetable", code_object.linetable);
    P("code_firstlineno", code_object.firstlineno);
    P("code_adaptive", code_object.co_code_adaptive);
    P("ob_type", pyobject.ob_type);
    P("bytes_ob_size", bytes_object.ob_size);
    P("bytes_ob_sval", bytes_object.ob_sval);
    P("unicode_state", unicode_object.state);
    P("unicode_length", unicode_object.length);
    P("unicode_ascii_size", unicode_object.asciiobject_size);
    return 0;
}
