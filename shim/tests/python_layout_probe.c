/* Prints the offsets shim/src/python/layout.rs hard-codes, as CPython's own headers give them,
 * one "name value" per line. Compiled by that file's test against each installed version:
 * cc -I<include> -I<include>/internal python_layout_probe.c */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030e0000
#include "internal/pycore_interpframe_structs.h"
#include "internal/pycore_stackref.h"
#endif
#else
#include <frameobject.h>
#endif

#define P(name, expr) printf("%s %zu\n", name, (size_t)(expr))

int main(void) {
    P("tstate.thread_id", offsetof(PyThreadState, thread_id));
    P("tstate.interp", offsetof(PyThreadState, interp));
#if PY_VERSION_HEX >= 0x030d0000
    P("tstate.frame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030b0000
    P("tstate.cframe", offsetof(PyThreadState, cframe));
    P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
#else
    P("tstate.frame", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030b0000
#if PY_VERSION_HEX >= 0x030d0000
    P("frame.code", offsetof(_PyInterpreterFrame, f_executable));
    P("frame.instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
    P("frame.code", offsetof(_PyInterpreterFrame, f_code));
    P("frame.instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
    P("frame.back", offsetof(_PyInterpreterFrame, previous));
    P("frame.owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030c0000
    P("frame.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#elif PY_VERSION_HEX < 0x030e0000
    P("owner.cstack", FRAME_OWNED_BY_CSTACK);
#else
    /* 3.14 renamed the entry frame's owner; FRAME_OWNED_BY_CSTACK (4) is assigned nowhere. */
    P("owner.cstack", FRAME_OWNED_BY_INTERPRETER);
    P("frame.code_tag_bits", Py_TAG_REFCNT);
#endif
    P("owner.generator", FRAME_OWNED_BY_GENERATOR);
    P("code.name", offsetof(PyCodeObject, co_qualname));
    P("code.linetable", offsetof(PyCodeObject, co_linetable));
    P("code.firsttraceable", offsetof(PyCodeObject, _co_firsttraceable));
    P("code.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
    P("frame.back", offsetof(PyFrameObject, f_back));
    P("frame.code", offsetof(PyFrameObject, f_code));
    P("frame.lasti", offsetof(PyFrameObject, f_lasti));
    P("code.name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030a0000
    P("code.linetable", offsetof(PyCodeObject, co_linetable));
#else
    P("code.linetable", offsetof(PyCodeObject, co_lnotab));
#endif
#endif
    P("code.filename", offsetof(PyCodeObject, co_filename));
    P("code.firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("object.type", offsetof(PyObject, ob_type));
    P("var.size", offsetof(PyVarObject, ob_size));
    P("bytes.sval", offsetof(PyBytesObject, ob_sval));
    P("unicode.length", offsetof(PyASCIIObject, length));
    P("unicode.state", offsetof(PyASCIIObject, state));
    P("unicode.ascii_data", sizeof(PyASCIIObject));
    P("unicode.compact_data", sizeof(PyCompactUnicodeObject));
    /* The state bit field as one 32-bit word, with kind 1, compact and ascii set. */
    PyASCIIObject s;
    memset(&s, 0, sizeof s);
    s.state.kind = 1;
    s.state.compact = 1;
    s.state.ascii = 1;
    unsigned int bits;
    memcpy(&bits, (char *)&s + offsetof(PyASCIIObject, state), sizeof bits);
    P("unicode.state_bits", bits);
    return 0;
}
