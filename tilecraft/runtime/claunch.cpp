/* tilecraft's compiled launcher: the whole cached call of a static kernel in one C function.
 *
 * Built by runtime/claunch.py with the system C++ compiler against Python.h only (no torch or
 * CUDA headers): the tensors are read through their Python attributes (dtype, is_cuda/is_cpu,
 * get_device(), shape, is_contiguous(), data_ptr()), outputs are made by calling
 * torch.empty_like, and the kernel is started through a function pointer handed in as an int:
 * libcuda's cuLaunchKernel (resolved at runtime by the Python side) or the CPU target's entry.
 *
 * A `Launcher` holds one kernel signature.  Calling it with (args_tuple, stream) either
 *   - checks every argument (exact tensor type, dtype, device kind, one device index for all,
 *     static shape, contiguity), allocates the missing outputs, launches and returns the
 *     outputs, or
 *   - returns the `miss` sentinel without side effects when any check fails, so that the caller
 *     runs the general checked path (which raises the detailed error or accepts what this test
 *     is too strict for: a tensor subclass, a DLPack tensor).
 * Argument storage is on the C stack (no lock, thread-safe); the GIL is released around the
 * launch itself, as ctypes did.  A non-zero launch result goes to the `on_error` callable.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef TC_WITH_TORCH
/* Built a second way when torch's headers are there (runtime/claunch.py tries this first): a
 * torch.Tensor's metadata is read from its at::Tensor directly and outputs come from
 * at::empty's operator, instead of ~6 Python attribute calls per tensor.  Same checks, same misses.
 * Light headers only (~2.5 CPU-s to build instead of ~12): torch/csrc/autograd/python_variable.h
 * pulls pybind11 and autograd (~8 s of parsing alone) and ATen/ops/empty.h most of ATen (~4 s),
 * so the three things used from python_variable.h are declared below and at::empty's one-line
 * body is written out (in empty_memory_format()). */
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_ops.h>
#include <torch/csrc/Dtype.h>

/* torch.Tensor; the same declaration in every torch >= 2.1 */
TORCH_PYTHON_API extern PyObject *THPVariableClass;
/* THPVariable_Wrap's signature changed: (TensorBase) by value in torch 2.1, (const TensorBase &)
 * later, with (TensorBase &&) beside it in recent torch (2.11, 2.13).  Each exact signature is
 * declared weak: the ones this libtorch_python lacks are null instead of failing the import, and
 * wrap() calls one that is there. */
TORCH_PYTHON_API PyObject *THPVariable_Wrap(at::TensorBase &&var) __attribute__((weak));
TORCH_PYTHON_API PyObject *THPVariable_Wrap(const at::TensorBase &var) __attribute__((weak));
TORCH_PYTHON_API PyObject *THPVariable_Wrap(at::TensorBase var) __attribute__((weak));

static PyObject *(*const wrap_move)(at::TensorBase &&) = THPVariable_Wrap;
static PyObject *(*const wrap_ref)(const at::TensorBase &) = THPVariable_Wrap;
static PyObject *(*const wrap_value)(at::TensorBase) = THPVariable_Wrap;

static PyObject *wrap(at::Tensor &&x) {
    if (wrap_move) return wrap_move(std::move(x));
    if (wrap_ref) return wrap_ref(x);
    return wrap_value(std::move(x));
}

/* Where a torch.Tensor object keeps its at::Tensor (THPVariable::cdata, which torch's inline
 * THPVariable_Unpack reads): right after the object header in recent torch (2.11, 2.13), where cdata
 * is a plain at::Tensor.  Older torch (2.1) holds a c10::MaybeOwned<at::Tensor> there, which can be a
 * *borrowed* pointer (a resurrected tensor): that layout is not read here.  Found once, on a tensor
 * made here: the word right after the header must hold its TensorImpl.  -1: not that layout (or no
 * THPVariable_Wrap): tensors are read through Python, as in the capi build -- slower, never wrong. */
static Py_ssize_t cdata_at = 0;

static at::Tensor empty_memory_format(const int64_t *shape, int ndim, c10::ScalarType dtype, at::Device where) {
    /* at::empty(shape, TensorOptions().dtype(dtype).device(where)) as ATen/ops/empty.h writes it */
    return at::_ops::empty_memory_format::call(c10::fromIntArrayRefSlow(at::IntArrayRef(shape, (size_t)ndim)), dtype,
                                               {}, where, {}, {});
}

static Py_ssize_t find_cdata(void) {
    if (cdata_at != 0) return cdata_at;
    cdata_at = -1;
    if (THPVariableClass == NULL || (!wrap_move && !wrap_ref && !wrap_value)) return cdata_at;
    try {
        static const int64_t one = 1;
        at::Tensor x = empty_memory_format(&one, 1, c10::ScalarType::Float, at::Device(at::kCPU));
        const void *impl = x.unsafeGetTensorImpl();
        PyObject *o = wrap(at::Tensor(x));
        if (o == NULL) { PyErr_Clear(); return cdata_at; }
        if (Py_TYPE(o) == (PyTypeObject *)THPVariableClass) {
            const Py_ssize_t off = (Py_ssize_t)sizeof(PyObject);
            if (off + (Py_ssize_t)sizeof(void *) <= Py_TYPE(o)->tp_basicsize &&
                *(void *const *)((const char *)o + off) == impl)
                cdata_at = off;
        }
        Py_DECREF(o);
    } catch (...) {
        PyErr_Clear();
    }
    return cdata_at;
}

static inline const at::Tensor &unpack(PyObject *t) {
    return *(const at::Tensor *)((const char *)t + cdata_at);
}
#endif

#define TC_MAXP 64   /* most parameters a Launcher takes (more: the Python path) */
#define TC_MAXDEV 16 /* devices whose function handle is cached here */

typedef int (*tc_cu_launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned smem, void *stream,
                              void **params, void **extra);
typedef int (*tc_cpu_entry_t)(void **ptrs, int64_t *dims);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int nparams, n_in, n_out, launch_kind, want_index, ndev;
    int native;      /* tensor_type is torch.Tensor and this build reads at::Tensor directly */
    int want_cuda;   /* device_attr is "is_cuda" (else "is_cpu") */
#ifdef TC_WITH_TORCH
    c10::ScalarType stype[TC_MAXP];
#endif
    PyObject *tensor_type, *device_attr, *empty_like, *alloc, *raw_stream, *stream_handle;
    PyObject *load, *on_error, *miss;
    PyObject *dtypes[TC_MAXP];
    int ndim[TC_MAXP];
    int64_t *shape[TC_MAXP];
    char is_out[TC_MAXP];
    int twin[TC_MAXP];
    void *fn, *dims;
    unsigned grid[3], block[3], smem;
    int dev_key[TC_MAXDEV];
    void *dev_fn[TC_MAXDEV];
} Launcher;

static PyObject *s_dtype, *s_shape, *s_get_device, *s_is_contiguous, *s_data_ptr;

/* 1: the attribute is exactly True; 0: anything else (an error is cleared: a miss) */
static int attr_is_true(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) { PyErr_Clear(); return 0; }
    int ok = v == Py_True;
    Py_DECREF(v);
    return ok;
}

static PyObject *call_method0(PyObject *o, PyObject *name) {
    PyObject *args[1] = {o};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* the tensor test of one parameter; *dev is the first tensor's device index (-2: none yet) */
static int tensor_ok(Launcher *L, int i, PyObject *t, long *dev) {
    if ((PyObject *)Py_TYPE(t) != L->tensor_type) return 0;
#ifdef TC_WITH_TORCH
    if (L->native) {
      try {
        const at::Tensor &x = unpack(t);
        if (x.scalar_type() != L->stype[i] || x.layout() != c10::kStrided ||
            (L->want_cuda ? !x.is_cuda() : !x.is_cpu()))
            return 0;
        if (L->want_index) {
            long d = x.get_device();
            if (*dev == -2) *dev = d;
            else if (d != *dev) return 0;
        }
        c10::IntArrayRef sizes = x.sizes();
        if ((int)sizes.size() != L->ndim[i]) return 0;
        for (int d = 0; d < L->ndim[i]; d++)
            if (sizes[d] != L->shape[i][d]) return 0;
        return x.is_contiguous();
      } catch (...) {
        return 0;  /* a tensor whose metadata throws (nested, ...): the checked path says why */
      }
    }
#endif
    PyObject *v = PyObject_GetAttr(t, s_dtype);
    if (v == NULL) { PyErr_Clear(); return 0; }
    int ok = v == L->dtypes[i];
    Py_DECREF(v);
    if (!ok || !attr_is_true(t, L->device_attr)) return 0;
    if (L->want_index) {
        v = call_method0(t, s_get_device);
        if (v == NULL) { PyErr_Clear(); return 0; }
        long d = PyLong_AsLong(v);
        Py_DECREF(v);
        if (d == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        if (*dev == -2) *dev = d;
        else if (d != *dev) return 0;
    }
    v = PyObject_GetAttr(t, s_shape);
    if (v == NULL) { PyErr_Clear(); return 0; }
    ok = PyTuple_Check(v) && PyTuple_GET_SIZE(v) == L->ndim[i];
    for (int d = 0; ok && d < L->ndim[i]; d++) {
        long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(v, d));
        if (s == -1 && PyErr_Occurred()) { PyErr_Clear(); ok = 0; }
        else ok = s == L->shape[i][d];
    }
    Py_DECREF(v);
    if (!ok) return 0;
    v = call_method0(t, s_is_contiguous);
    if (v == NULL) { PyErr_Clear(); return 0; }
    ok = v == Py_True;
    Py_DECREF(v);
    return ok;
}

static void *device_function(Launcher *L, long dev) {
    for (int k = 0; k < L->ndev; k++)
        if (L->dev_key[k] == dev) return L->dev_fn[k];
    PyObject *d = PyLong_FromLong(dev);
    if (d == NULL) return NULL;
    PyObject *h = PyObject_CallOneArg(L->load, d);
    Py_DECREF(d);
    if (h == NULL) return NULL;
    void *fn = PyLong_AsVoidPtr(h);
    Py_DECREF(h);
    if (fn == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "tilecraft launcher: null CUDA function handle");
        return NULL;
    }
    if (L->ndev < TC_MAXDEV) { L->dev_key[L->ndev] = (int)dev; L->dev_fn[L->ndev] = fn; L->ndev++; }
    return fn;
}

static PyObject *launcher_call(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames) {
    Launcher *L = (Launcher *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "tilecraft launcher: expects (args_tuple, stream)");
        return NULL;
    }
    PyObject *tup = argv[0], *stream = argv[1];
    if (!PyTuple_CheckExact(tup)) return Py_NewRef(L->miss);
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    int given;
    if (n == L->n_in) given = 0;
    else if (n == L->nparams && L->n_out > 0) given = 1;
    else return Py_NewRef(L->miss);

    PyObject *t[TC_MAXP];
    PyObject *made[TC_MAXP];
    void *ptr[TC_MAXP];
    long dev = -2;
    Py_ssize_t k = 0;
    int i, nmade = 0;
    for (i = 0; i < L->nparams; i++) {
        if (L->is_out[i] && !given) { t[i] = NULL; continue; }
        t[i] = PyTuple_GET_ITEM(tup, k++);
        if (!tensor_ok(L, i, t[i], &dev)) return Py_NewRef(L->miss);
    }
    if (dev == -2) dev = -1;
    PyObject *result = NULL;
    if (!given) {
        for (i = 0; i < L->nparams; i++) {
            if (!L->is_out[i]) continue;
            PyObject *o = NULL;
#ifdef TC_WITH_TORCH
            if (L->native) {
                /* one dispatch, contiguous: what torch.empty_like gives for a checked contiguous twin */
                try {
                    at::Device where = L->want_cuda ? at::Device(at::kCUDA, (c10::DeviceIndex)dev) : at::Device(at::kCPU);
                    o = wrap(empty_memory_format(L->shape[i], L->ndim[i], L->stype[i], where));
                } catch (...) {
                    o = NULL;  /* e.g. out of memory: the Python allocation below raises torch's own error */
                }
                if (o == NULL) PyErr_Clear();
            }
#endif
            if (o == NULL) {
                if (L->twin[i] >= 0) o = PyObject_CallOneArg(L->empty_like, t[L->twin[i]]);
                else o = PyObject_CallFunction(L->alloc, "il", i, dev);
            }
            if (o == NULL) goto done;
            t[i] = made[nmade++] = o;
        }
    }
    for (i = 0; i < L->nparams; i++) {
#ifdef TC_WITH_TORCH
        if (L->native) {
            try {
                ptr[i] = unpack(t[i]).data_ptr();
                continue;
            } catch (...) {
                /* torch's data_ptr() below raises the error as Python sees it */
            }
        }
#endif
        PyObject *v = call_method0(t[i], s_data_ptr);
        if (v == NULL) goto done;
        ptr[i] = PyLong_AsVoidPtr(v);
        Py_DECREF(v);
        if (ptr[i] == NULL && PyErr_Occurred()) goto done;
    }
    {
        int err;
        void *sv = NULL;
        if (L->launch_kind == 0) {
            tc_cpu_entry_t entry = (tc_cpu_entry_t)L->fn;
            Py_BEGIN_ALLOW_THREADS
            err = entry(ptr, (int64_t *)L->dims);
            Py_END_ALLOW_THREADS
        } else {
            void *fn = device_function(L, dev);
            if (fn == NULL) goto done;
            PyObject *s;
            if (stream == Py_None) {
                PyObject *d = PyLong_FromLong(dev);
                if (d == NULL) goto done;
                s = PyObject_CallOneArg(L->raw_stream, d);
                Py_DECREF(d);
            } else {
                s = PyObject_CallOneArg(L->stream_handle, stream);
            }
            if (s == NULL) goto done;
            sv = PyLong_AsVoidPtr(s);
            Py_DECREF(s);
            if (sv == NULL && PyErr_Occurred()) goto done;
            void *slot[TC_MAXP];
            for (i = 0; i < L->nparams; i++) slot[i] = &ptr[i];
            tc_cu_launch_t launch = (tc_cu_launch_t)L->fn;
            Py_BEGIN_ALLOW_THREADS
            err = launch(fn, L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2],
                         L->smem, sv, slot, NULL);
            Py_END_ALLOW_THREADS
        }
        if (err) {
            PyObject *ptrs = PyList_New(L->nparams);
            if (ptrs == NULL) goto done;
            for (i = 0; i < L->nparams; i++) {
                PyObject *p = PyLong_FromVoidPtr(ptr[i]);
                if (p == NULL) { Py_DECREF(ptrs); goto done; }
                PyList_SET_ITEM(ptrs, i, p);
            }
            PyObject *r = PyObject_CallFunction(L->on_error, "ilNN", err, dev, PyLong_FromVoidPtr(sv), ptrs);
            if (r == NULL) goto done;  /* it raised: the error propagates */
            Py_DECREF(r);
        }
    }
    if (L->n_out == 0) {
        result = Py_NewRef(Py_None);
    } else if (L->n_out == 1) {
        for (i = 0; i < L->nparams; i++)
            if (L->is_out[i]) { result = Py_NewRef(t[i]); break; }
    } else {
        result = PyTuple_New(L->n_out);
        if (result != NULL) {
            Py_ssize_t j = 0;
            for (i = 0; i < L->nparams; i++)
                if (L->is_out[i]) PyTuple_SET_ITEM(result, j++, Py_NewRef(t[i]));
        }
    }
done:
    for (i = 0; i < nmade; i++) Py_DECREF(made[i]);
    return result;
}

static void launcher_dealloc(PyObject *self) {
    Launcher *L = (Launcher *)self;
    Py_XDECREF(L->tensor_type); Py_XDECREF(L->device_attr); Py_XDECREF(L->empty_like);
    Py_XDECREF(L->alloc); Py_XDECREF(L->raw_stream); Py_XDECREF(L->stream_handle);
    Py_XDECREF(L->load); Py_XDECREF(L->on_error); Py_XDECREF(L->miss);
    for (int i = 0; i < TC_MAXP; i++) {
        Py_XDECREF(L->dtypes[i]);
        PyMem_Free(L->shape[i]);
    }
    Py_TYPE(self)->tp_free(self);
}

static unsigned as_unsigned(PyObject *seq, int k, int *bad) {
    PyObject *o = PySequence_GetItem(seq, k);
    if (o == NULL) { *bad = 1; return 0; }
    unsigned long v = PyLong_AsUnsignedLong(o);
    Py_DECREF(o);
    if (PyErr_Occurred()) { *bad = 1; return 0; }
    return (unsigned)v;
}

/* Launcher(tensor_type, dtypes, shapes, is_out, twins, device_attr, want_index, empty_like, alloc,
 *          launch_kind, fn_addr, dims_addr, grid, block, smem, load, raw_stream, stream_handle,
 *          on_error, miss) */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *tensor_type, *dtypes, *shapes, *is_out, *twins, *device_attr, *empty_like, *alloc;
    PyObject *fn_addr, *dims_addr, *grid, *block, *load, *raw_stream, *stream_handle, *on_error, *miss;
    int want_index, launch_kind;
    unsigned int smem;
    if (!PyArg_ParseTuple(args, "OOOOOUpOOiOOOOIOOOOO:Launcher", &tensor_type, &dtypes, &shapes, &is_out,
                          &twins, &device_attr, &want_index, &empty_like, &alloc, &launch_kind, &fn_addr,
                          &dims_addr, &grid, &block, &smem, &load, &raw_stream, &stream_handle, &on_error,
                          &miss))
        return NULL;
    Py_ssize_t n = PySequence_Size(dtypes);
    if (n < 0) return NULL;
    if (n > TC_MAXP || PySequence_Size(shapes) != n || PySequence_Size(is_out) != n ||
        PySequence_Size(twins) != n) {
        PyErr_Format(PyExc_ValueError, "tilecraft launcher: %zd parameters (at most %d; every list one entry each)",
                     n, TC_MAXP);
        return NULL;
    }
    Launcher *L = (Launcher *)type->tp_alloc(type, 0);
    if (L == NULL) return NULL;
    L->vectorcall = launcher_call;
    L->nparams = (int)n;
    L->launch_kind = launch_kind;
    L->want_index = want_index;
    L->tensor_type = Py_NewRef(tensor_type);
    Py_INCREF(device_attr);
    PyUnicode_InternInPlace(&device_attr);
    L->device_attr = device_attr;
    L->want_cuda = PyUnicode_CompareWithASCIIString(device_attr, "is_cuda") == 0;
#ifdef TC_WITH_TORCH
    L->native = PyType_Check(tensor_type) && (PyTypeObject *)tensor_type == (PyTypeObject *)THPVariableClass &&
                (L->want_cuda || PyUnicode_CompareWithASCIIString(device_attr, "is_cpu") == 0) && find_cdata() > 0;
#endif
    L->empty_like = Py_NewRef(empty_like); L->alloc = Py_NewRef(alloc);
    L->raw_stream = Py_NewRef(raw_stream); L->stream_handle = Py_NewRef(stream_handle);
    L->load = Py_NewRef(load); L->on_error = Py_NewRef(on_error); L->miss = Py_NewRef(miss);
    L->fn = PyLong_AsVoidPtr(fn_addr);
    L->dims = dims_addr == Py_None ? NULL : PyLong_AsVoidPtr(dims_addr);
    int bad = PyErr_Occurred() != NULL;
    for (int k = 0; k < 3 && !bad; k++) {
        L->grid[k] = as_unsigned(grid, k, &bad);
        if (!bad) L->block[k] = as_unsigned(block, k, &bad);
    }
    L->smem = smem;
    for (int i = 0; i < L->nparams && !bad; i++) {
        L->dtypes[i] = PySequence_GetItem(dtypes, i);
        PyObject *o = PySequence_GetItem(is_out, i);
        PyObject *tw = PySequence_GetItem(twins, i);
        PyObject *shp = PySequence_GetItem(shapes, i);
        if (!L->dtypes[i] || !o || !tw || !shp) bad = 1;
#ifdef TC_WITH_TORCH
        if (!bad && L->native) {
            if (THPDtype_Check(L->dtypes[i])) L->stype[i] = ((THPDtype *)L->dtypes[i])->scalar_type;
            else L->native = 0;
        }
#endif
        if (!bad) {
            L->is_out[i] = (char)PyObject_IsTrue(o);
            L->twin[i] = (int)PyLong_AsLong(tw);
            Py_ssize_t nd = PySequence_Size(shp);
            if (nd < 0 || PyErr_Occurred()) bad = 1;
            else {
                L->ndim[i] = (int)nd;
                L->shape[i] = (int64_t *)PyMem_Malloc(sizeof(int64_t) * (nd ? nd : 1));
                for (Py_ssize_t d = 0; d < nd && !bad; d++) {
                    PyObject *s = PySequence_GetItem(shp, d);
                    if (s == NULL) { bad = 1; break; }
                    L->shape[i][d] = PyLong_AsLongLong(s);
                    Py_DECREF(s);
                    if (PyErr_Occurred()) bad = 1;
                }
            }
        }
        Py_XDECREF(o); Py_XDECREF(tw); Py_XDECREF(shp);
        if (!bad) {
            if (L->is_out[i]) L->n_out++;
            else L->n_in++;
        }
    }
    if (bad || PyErr_Occurred()) {
        Py_DECREF(L);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "tilecraft launcher: bad arguments");
        return NULL;
    }
    return (PyObject *)L;
}

static PyMemberDef launcher_members[] = {
    {(char *)"native", T_INT, offsetof(Launcher, native), READONLY,
     (char *)"1 when tensors are read as at::Tensor (torch-aware build, torch.Tensor), 0 through Python"},
    {(char *)"nparams", T_INT, offsetof(Launcher, nparams), READONLY, (char *)"parameters of the signature"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject LauncherType = {PyVarObject_HEAD_INIT(NULL, 0)};

/* A no-op with cuLaunchKernel's signature: the driver stubbed out, for profiles and tests. */
extern "C" int tc_stub_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)stream;
    (void)params; (void)extra;
    return 0;
}

static PyObject *stub_launch_address(PyObject *, PyObject *) {
    return PyLong_FromVoidPtr((void *)&tc_stub_launch);
}

static PyObject *native_build(PyObject *, PyObject *) {
#ifdef TC_WITH_TORCH
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef module_methods[] = {
    {"stub_launch_address", stub_launch_address, METH_NOARGS,
     "Address of a no-op with cuLaunchKernel's signature (the driver stubbed out)."},
    {"native_build", native_build, METH_NOARGS,
     "Whether this build reads torch.Tensor metadata from at::Tensor (torch headers) or through Python."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_tclaunch",
                                        "tilecraft's compiled launcher (see runtime/claunch.cpp)", -1,
                                        module_methods};

extern "C" PyMODINIT_FUNC PyInit__tclaunch(void) {
    LauncherType.tp_name = "tilecraft._tclaunch.Launcher";
    LauncherType.tp_basicsize = sizeof(Launcher);
    LauncherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
    LauncherType.tp_new = launcher_new;
    LauncherType.tp_dealloc = launcher_dealloc;
    LauncherType.tp_call = PyVectorcall_Call;
    LauncherType.tp_vectorcall_offset = offsetof(Launcher, vectorcall);
    LauncherType.tp_doc = "One static kernel signature: call with (args_tuple, stream).";
    LauncherType.tp_members = launcher_members;
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!s_dtype || !s_shape || !s_get_device || !s_is_contiguous || !s_data_ptr) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
