// Native checks called from stenograph's generated guard functions.
//
// Built on first need by stenograph/guards/native.py (torch.utils.cpp_extension). Each check is
// an object built once, when a guard function is built, and called once per guard call with the
// value to check: `TensorCheck(cls, dtype, ...)(v)` and `ModuleCheck(cls, ...)(m)` answer True or
// False exactly as the Python expressions they replace (guard_set.py's `tensor_match`, and a
// module's type, hook-table, instance-dict and flag checks). A Python error raised while checking
// propagates, so the guard function treats it as the Python expression's error.
//
// What the C++ side cannot answer the same way as Python it hands to the Python expression (the
// `fallback` of a TensorCheck): a torch-function mode is active (Python's `v.dtype` would call
// it), or the tensor is not plain strided memory (sparse, nested, symbolic or Python-defined
// sizes).

#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/version.h>

#include <cstdint>
#include <limits>
#include <new>
#include <vector>

// A Python tensor (torch.Tensor or nn.Parameter) is a THPVariable: the object header, then the
// at::Tensor it wraps, i.e. one intrusive pointer to the TensorImpl. For the torch versions read
// here that layout is declared below instead of including torch/csrc/autograd/python_variable.h,
// whose parsing (pybind11, all of ATen's Tensor methods) would be most of the build time; module
// initialisation checks it against `Tensor._cdata` (the TensorImpl's address) and refuses to load
// if they differ. Other versions include the header.
#define STENOGRAPH_KNOWN_TENSOR_LAYOUT \
  (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10 && TORCH_VERSION_MINOR <= 15)
#if !STENOGRAPH_KNOWN_TENSOR_LAYOUT
#include <torch/csrc/autograd/python_variable.h>
#endif

namespace {

#if STENOGRAPH_KNOWN_TENSOR_LAYOUT
struct VariableLayout {
  PyObject_HEAD
  c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
};

c10::TensorImpl* tensor_impl(PyObject* tensor) {
  return reinterpret_cast<VariableLayout*>(tensor)->impl.get();
}
#else
c10::TensorImpl* tensor_impl(PyObject* tensor) {
  return THPVariable_Unpack(tensor).unsafeGetTensorImpl();
}
#endif

PyObject* tensor_type = nullptr;  // torch.Tensor
PyObject* parameter_type = nullptr;  // torch.nn.Parameter

// a size or stride left to the shape guards (symbolic in the traced graph)
constexpr int64_t kUnchecked = std::numeric_limits<int64_t>::min();

PyObject* answer(bool ok) {
  return Py_NewRef(ok ? Py_True : Py_False);
}

bool read_layout(PyObject* seq, std::vector<int64_t>& out, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) {
    return false;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    if (item == Py_None) {
      out.push_back(kUnchecked);
      continue;
    }
    long long value = PyLong_AsLongLong(item);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out.push_back(value);
  }
  Py_DECREF(fast);
  return true;
}

bool layout_matches(c10::IntArrayRef actual, const std::vector<int64_t>& expected) {
  for (size_t i = 0; i < expected.size(); i++) {
    if (expected[i] != kUnchecked && expected[i] != actual[i]) {
      return false;
    }
  }
  return true;
}

// -- TensorCheck -----------------------------------------------------------------------------

struct TensorCheck {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyTypeObject* type;  // Tensor or Parameter, compared by identity as `type(v) is T`
  caffe2::TypeMeta dtype;
  c10::Device device;
  bool requires_grad;
  std::vector<int64_t> sizes;  // the dimension count is their length
  std::vector<int64_t> strides;
  PyObject* fallback;  // the Python expression, as a function of the value
};

// Whether `impl` has the plain metadata the fields above describe; None: Python must answer.
enum class Verdict { kFail, kPass, kAskPython };

Verdict check_impl(const TensorCheck* self, const c10::TensorImpl* impl) {
  if (impl->is_nested() || impl->is_python_dispatch() || impl->has_symbolic_sizes_strides() ||
      impl->layout() != c10::kStrided) {
    return Verdict::kAskPython;
  }
  if (impl->dtype() != self->dtype) {
    return Verdict::kFail;
  }
  // a CPU tensor matches any CPU device, as the Python check's `v.is_cpu`
  c10::Device device = impl->device();
  if (self->device.is_cpu() ? !device.is_cpu() : device != self->device) {
    return Verdict::kFail;
  }
  c10::IntArrayRef sizes = impl->sizes();
  if (sizes.size() != self->sizes.size() || !layout_matches(sizes, self->sizes) ||
      !layout_matches(impl->strides(), self->strides)) {
    return Verdict::kFail;
  }
  return impl->requires_grad() == self->requires_grad ? Verdict::kPass : Verdict::kFail;
}

PyObject* tensor_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<TensorCheck*>(callable);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "TensorCheck takes one positional argument");
    return nullptr;
  }
  PyObject* value = args[0];
  if (Py_TYPE(value) != self->type) {
    return answer(false);
  }
  if (at::impl::torch_function_mode_enabled()) {
    return PyObject_CallOneArg(self->fallback, value);
  }
  Verdict verdict;
  try {
    verdict = check_impl(self, tensor_impl(value));
  } catch (const std::exception&) {
    verdict = Verdict::kAskPython;
  }
  if (verdict == Verdict::kAskPython) {
    return PyObject_CallOneArg(self->fallback, value);
  }
  return answer(verdict == Verdict::kPass);
}

PyObject* tensor_check_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"cls", "dtype", "device", "requires_grad", "sizes", "strides", "fallback", nullptr};
  PyObject *type, *dtype, *device, *sizes, *strides, *fallback;
  int requires_grad;
  if (!PyArg_ParseTupleAndKeywords(
          args,
          kwargs,
          "O!O!O!pOOO:TensorCheck",
          const_cast<char**>(names),
          &PyType_Type,
          &type,
          &THPDtypeType,
          &dtype,
          &THPDeviceType,
          &device,
          &requires_grad,
          &sizes,
          &strides,
          &fallback)) {
    return nullptr;
  }
  if (type != tensor_type && type != parameter_type) {
    PyErr_SetString(PyExc_TypeError, "TensorCheck: cls must be torch.Tensor or torch.nn.Parameter");
    return nullptr;
  }
  auto* self = reinterpret_cast<TensorCheck*>(cls->tp_alloc(cls, 0));
  if (self == nullptr) {
    return nullptr;
  }
  new (&self->dtype) caffe2::TypeMeta(caffe2::TypeMeta::fromScalarType(reinterpret_cast<THPDtype*>(dtype)->scalar_type));
  new (&self->device) c10::Device(reinterpret_cast<THPDevice*>(device)->device);
  new (&self->sizes) std::vector<int64_t>();
  new (&self->strides) std::vector<int64_t>();
  self->vectorcall = tensor_check_call;
  self->type = reinterpret_cast<PyTypeObject*>(Py_NewRef(type));
  self->requires_grad = requires_grad != 0;
  self->fallback = Py_NewRef(fallback);
  if (!read_layout(sizes, self->sizes, "sizes must be a sequence") ||
      !read_layout(strides, self->strides, "strides must be a sequence")) {
    Py_DECREF(self);
    return nullptr;
  }
  if (self->sizes.size() != self->strides.size()) {
    PyErr_SetString(PyExc_ValueError, "TensorCheck: sizes and strides differ in length");
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void tensor_check_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<TensorCheck*>(obj);
  Py_XDECREF(self->type);
  Py_XDECREF(self->fallback);
  self->sizes.~vector();
  self->strides.~vector();
  Py_TYPE(obj)->tp_free(obj);
}

PyTypeObject TensorCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// -- ModuleCheck -----------------------------------------------------------------------------

struct ModuleCheck {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyTypeObject* type;  // `type(m) is T`
  PyObject* empty;  // tuple of attribute names whose values must be falsy (`not m._forward_hooks`)
  PyObject* absent;  // tuple of keys that must not be in `m.__dict__`
  PyObject* same;  // tuple of (attribute name, object) pairs: `m.training is True`
  // While T's version tag is `version` (no class in T's MRO changed since the check was built),
  // the attributes read are known to be plain instance-dict entries; 0: always ask getattr.
  unsigned int version;
};

PyObject* dict_name = nullptr;  // "__dict__", interned
PyObject* getattribute_name = nullptr;  // "__getattribute__", interned
PyObject* object_getattribute = nullptr;  // object.__getattribute__ (a slot wrapper)
getter instance_dict_getter = nullptr;  // what a Python class's `__dict__` descriptor calls

// Whether `getattr(m, name)` for an instance m of `type` is m's instance-dict entry when it has
// one: `__getattribute__` is object's and no class in the MRO defines `name` (no descriptor).
bool plain_attribute(PyTypeObject* type, PyObject* name) {
  return _PyType_Lookup(type, name) == nullptr;
}

// Whether `m.__dict__` is Python's own instance dict (the `__dict__` descriptor every class
// gets, not a property of the class's own).
bool plain_instance_dict(PyTypeObject* type) {
  PyObject* descriptor = _PyType_Lookup(type, dict_name);
  return descriptor != nullptr && Py_TYPE(descriptor) == &PyGetSetDescr_Type &&
      reinterpret_cast<PyGetSetDescrObject*>(descriptor)->d_getset->get == instance_dict_getter;
}

unsigned int fast_path_version(PyTypeObject* type, PyObject* empty, PyObject* absent, PyObject* same) {
  if (_PyType_Lookup(type, getattribute_name) != object_getattribute) {
    return 0;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(empty); i++) {
    if (!plain_attribute(type, PyTuple_GET_ITEM(empty, i))) {
      return 0;
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(same); i++) {
    if (!plain_attribute(type, PyTuple_GET_ITEM(PyTuple_GET_ITEM(same, i), 0))) {
      return 0;
    }
  }
  if (!plain_instance_dict(type)) {
    return 0;
  }
  // the lookups above gave the type a version tag (0 if none could be assigned)
  return type->tp_version_tag;
}

// `getattr(module, name)` (a new reference, or nullptr with an exception set). `dict` is the
// instance dict when the fast path holds, else nullptr.
PyObject* read_attribute(PyObject* module, PyObject* dict, PyObject* name) {
  if (dict != nullptr) {
    PyObject* found = PyDict_GetItemWithError(dict, name);
    if (found != nullptr) {
      return Py_NewRef(found);
    }
    if (PyErr_Occurred()) {
      return nullptr;
    }
    // not in the instance dict: Python's lookup goes on to the class's __getattr__
  }
  return PyObject_GetAttr(module, name);
}

PyObject* module_check_body(ModuleCheck* self, PyObject* module, PyObject* dict) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->empty); i++) {
    PyObject* value = read_attribute(module, dict, PyTuple_GET_ITEM(self->empty, i));
    if (value == nullptr) {
      return nullptr;
    }
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (truth != 0) {
      return truth < 0 ? nullptr : answer(false);
    }
  }
  if (PyTuple_GET_SIZE(self->absent) > 0) {
    PyObject* instance_dict = dict != nullptr ? Py_NewRef(dict) : PyObject_GetAttr(module, dict_name);
    if (instance_dict == nullptr) {
      return nullptr;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->absent); i++) {
      int found = PySequence_Contains(instance_dict, PyTuple_GET_ITEM(self->absent, i));
      if (found != 0) {
        Py_DECREF(instance_dict);
        return found < 0 ? nullptr : answer(false);
      }
    }
    Py_DECREF(instance_dict);
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->same); i++) {
    PyObject* pair = PyTuple_GET_ITEM(self->same, i);
    PyObject* value = read_attribute(module, dict, PyTuple_GET_ITEM(pair, 0));
    if (value == nullptr) {
      return nullptr;
    }
    bool same = value == PyTuple_GET_ITEM(pair, 1);
    Py_DECREF(value);
    if (!same) {
      return answer(false);
    }
  }
  return answer(true);
}

PyObject* module_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<ModuleCheck*>(callable);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "ModuleCheck takes one positional argument");
    return nullptr;
  }
  PyObject* module = args[0];
  if (Py_TYPE(module) != self->type) {
    return answer(false);
  }
  if (self->version == 0 || self->type->tp_version_tag != self->version) {
    return module_check_body(self, module, nullptr);
  }
  PyObject* dict = PyObject_GenericGetDict(module, nullptr);
  if (dict == nullptr) {
    return nullptr;
  }
  PyObject* result = module_check_body(self, module, dict);
  Py_DECREF(dict);
  return result;
}

bool interned_names(PyObject* names, const char* what) {
  if (!PyTuple_Check(names)) {
    PyErr_Format(PyExc_TypeError, "ModuleCheck: %s must be a tuple", what);
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
    if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
      PyErr_Format(PyExc_TypeError, "ModuleCheck: %s must hold strings", what);
      return false;
    }
  }
  return true;
}

PyObject* module_check_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"cls", "empty", "absent", "same", nullptr};
  PyObject *type, *empty, *absent, *same;
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "O!OOO:ModuleCheck", const_cast<char**>(names), &PyType_Type, &type, &empty, &absent, &same)) {
    return nullptr;
  }
  if (!interned_names(empty, "empty") || !interned_names(absent, "absent")) {
    return nullptr;
  }
  if (!PyTuple_Check(same)) {
    PyErr_SetString(PyExc_TypeError, "ModuleCheck: same must be a tuple of (name, object) pairs");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(same); i++) {
    PyObject* pair = PyTuple_GET_ITEM(same, i);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
      PyErr_SetString(PyExc_TypeError, "ModuleCheck: same must be a tuple of (name, object) pairs");
      return nullptr;
    }
  }
  auto* self = reinterpret_cast<ModuleCheck*>(cls->tp_alloc(cls, 0));
  if (self == nullptr) {
    return nullptr;
  }
  self->vectorcall = module_check_call;
  self->type = reinterpret_cast<PyTypeObject*>(Py_NewRef(type));
  self->empty = Py_NewRef(empty);
  self->absent = Py_NewRef(absent);
  self->same = Py_NewRef(same);
  self->version = fast_path_version(self->type, empty, absent, same);
  return reinterpret_cast<PyObject*>(self);
}

void module_check_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<ModuleCheck*>(obj);
  Py_XDECREF(self->type);
  Py_XDECREF(self->empty);
  Py_XDECREF(self->absent);
  Py_XDECREF(self->same);
  Py_TYPE(obj)->tp_free(obj);
}

PyTypeObject ModuleCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The lookups a plain Python class answers: object.__getattribute__, and the getter of the
// `__dict__` descriptor of a class statement's class (read off a class made here).
bool find_plain_lookups() {
  dict_name = PyUnicode_InternFromString("__dict__");
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  if (dict_name == nullptr || getattribute_name == nullptr) {
    return false;
  }
  object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);
  PyObject* plain = PyObject_CallFunction(
      reinterpret_cast<PyObject*>(&PyType_Type), "s(O){}", "_Plain", reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  if (plain == nullptr) {
    return false;
  }
  PyObject* descriptor = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(plain), dict_name);
  if (object_getattribute == nullptr || descriptor == nullptr || Py_TYPE(descriptor) != &PyGetSetDescr_Type) {
    Py_DECREF(plain);
    PyErr_SetString(PyExc_RuntimeError, "stenograph native checks: unexpected attribute lookup of plain classes");
    return false;
  }
  instance_dict_getter = reinterpret_cast<PyGetSetDescrObject*>(descriptor)->d_getset->get;
  Py_INCREF(object_getattribute);  // both live as long as the interpreter; kept from here
  Py_DECREF(plain);
  return true;
}

// Whether tensor_impl() reads the TensorImpl torch's own `_cdata` names, for a Tensor and a
// Parameter (sets an ImportError if not); keeps the two types for TensorCheck.
bool check_tensor_layout() {
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == nullptr) {
    return false;
  }
  PyObject* nn = PyObject_GetAttrString(torch, "nn");
  tensor_type = PyObject_GetAttrString(torch, "Tensor");
  parameter_type = nn == nullptr ? nullptr : PyObject_GetAttrString(nn, "Parameter");
  PyObject* tensor = PyObject_CallMethod(torch, "empty", "(ii)", 2, 3);
  PyObject* parameter = parameter_type == nullptr || tensor == nullptr
      ? nullptr
      : PyObject_CallFunctionObjArgs(parameter_type, tensor, nullptr);
  bool same = parameter != nullptr;
  for (PyObject* example : {tensor, parameter}) {
    if (!same) {
      break;
    }
    PyObject* address = PyObject_GetAttrString(example, "_cdata");
    same = address != nullptr && PyLong_AsVoidPtr(address) == tensor_impl(example) && tensor_impl(example)->dim() == 2;
    Py_XDECREF(address);
  }
  Py_XDECREF(parameter);
  Py_XDECREF(tensor);
  Py_XDECREF(nn);
  Py_DECREF(torch);
  if (PyErr_Occurred()) {
    return false;
  }
  if (!same) {
    PyErr_SetString(PyExc_ImportError, "stenograph native checks: torch's tensor objects have another layout");
    return false;
  }
  return true;
}

bool ready(
    PyTypeObject& type,
    const char* name,
    const char* doc,
    Py_ssize_t size,
    Py_ssize_t vectorcall_offset,
    newfunc make,
    destructor dealloc) {
  type.tp_name = name;
  type.tp_doc = doc;
  type.tp_basicsize = size;
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  type.tp_vectorcall_offset = vectorcall_offset;
  type.tp_call = PyVectorcall_Call;
  type.tp_new = make;
  type.tp_dealloc = dealloc;
  return PyType_Ready(&type) == 0;
}

// the loader names the extension after its source's hash (TORCH_EXTENSION_NAME)
#define STENOGRAPH_STR2(x) #x
#define STENOGRAPH_STR(x) STENOGRAPH_STR2(x)
#define STENOGRAPH_CONCAT2(a, b) a##b
#define STENOGRAPH_CONCAT(a, b) STENOGRAPH_CONCAT2(a, b)

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    STENOGRAPH_STR(TORCH_EXTENSION_NAME),
    "stenograph's native guard checks",
    -1};

}  // namespace

PyMODINIT_FUNC STENOGRAPH_CONCAT(PyInit_, TORCH_EXTENSION_NAME)() {
  if (!ready(
          TensorCheckType,
          "stenograph.TensorCheck",
          "TensorCheck(cls, dtype, device, requires_grad, sizes, strides, fallback): called with a value, "
          "whether it is a tensor of exactly type cls with these dtype, device, requires_grad, sizes and "
          "strides (None: any); fallback(value) answers where the metadata needs Python.",
          sizeof(TensorCheck),
          offsetof(TensorCheck, vectorcall),
          tensor_check_new,
          tensor_check_dealloc) ||
      !ready(
          ModuleCheckType,
          "stenograph.ModuleCheck",
          "ModuleCheck(cls, empty, absent, same): called with a value, whether its type is cls, the "
          "attributes named in empty are falsy, the keys in absent are not in its __dict__ and each "
          "(name, obj) of same has getattr(value, name) is obj.",
          sizeof(ModuleCheck),
          offsetof(ModuleCheck, vectorcall),
          module_check_new,
          module_check_dealloc)) {
    return nullptr;
  }
  if (!find_plain_lookups() || !check_tensor_layout()) {
    return nullptr;
  }
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) {
    return nullptr;
  }
  if (PyModule_AddObjectRef(module, "TensorCheck", reinterpret_cast<PyObject*>(&TensorCheckType)) < 0 ||
      PyModule_AddObjectRef(module, "ModuleCheck", reinterpret_cast<PyObject*>(&ModuleCheckType)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
