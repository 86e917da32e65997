// Native checks called from stenograph's generated guard functions.
//
// Built on first need by stenograph/guards/native.py (torch.utils.cpp_extension). Each check is
// an object built once, when a guard function is built, and called once per guard call with the
// value to check: `TensorCheck(cls, dtype, ...)(v)` and `ModuleCheck(cls, ...)(m)` answer True or
// False exactly as the Python expressions they replace (guard_set.py's `tensor_match`, and a
// module's type, hook-table, instance-dict and flag checks, with those on its constant
// attributes, parameters and buffers). A Python error raised while checking propagates, so the
// guard function treats it as the Python expression's error.
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

#include <cmath>
#include <cstdint>
#include <cstring>
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

// The answer of `self` for `value` (a new reference to True or False; nullptr with an exception).
PyObject* run_tensor_check(TensorCheck* self, PyObject* value) {
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

PyObject* tensor_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "TensorCheck takes one positional argument");
    return nullptr;
  }
  return run_tensor_check(reinterpret_cast<TensorCheck*>(callable), args[0]);
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

// The checks take part in garbage collection: a guard function's globals hold them, and what
// they hold (a Python fallback, a globals dict) can lead back to it. A cleared check answers
// False (its type is gone).
int tensor_check_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TensorCheck*>(obj);
  Py_VISIT(self->type);
  Py_VISIT(self->fallback);
  return 0;
}

int tensor_check_clear(PyObject* obj) {
  auto* self = reinterpret_cast<TensorCheck*>(obj);
  Py_CLEAR(self->type);
  Py_CLEAR(self->fallback);
  return 0;
}

void tensor_check_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<TensorCheck*>(obj);
  PyObject_GC_UnTrack(obj);
  tensor_check_clear(obj);
  self->sizes.~vector();
  self->strides.~vector();
  Py_TYPE(obj)->tp_free(obj);
}

PyTypeObject TensorCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyTypeObject ModuleCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// -- Member checks -----------------------------------------------------------------------------

// One step from an object to a value the guard reads: `.name`, `[name]`, or the instance dict as
// `object.__getattribute__(v, '__dict__')` finds it (whatever the class's own lookup does).
enum class How { kAttribute = 0, kItem = 1, kInstanceDict = 2 };

struct Step {
  PyObject* name;  // an attribute name, a key, or "__dict__"
  How how;
};

// What a member check asks of the value its steps reach.
enum class Op { kType, kIs, kIsNot, kIsReferent, kCode, kEqual, kZero, kEmpty, kNotIn, kKeys, kTensor, kModule };

// A check on a value reached from a module (or a fixed root) by `steps`: `m.stride`,
// `m._parameters['weight']`, `m.config.__dict__['x']`; of exactly `type` (nullptr: any type),
// then compared by `op` with `expected`.
struct MemberCheck {
  std::vector<Step> steps;
  PyTypeObject* type;
  Op op;
  // kType, kEmpty: unused; kIsReferent: a weak reference; kCode: a code object; kZero: 0.0 or
  // -0.0; kNotIn: the key; kKeys: the keys' tuple; kTensor: a TensorCheck; kModule: a ModuleCheck
  PyObject* expected;
};

PyObject* dict_name = nullptr;  // "__dict__", interned
PyObject* getattribute_name = nullptr;  // "__getattribute__", interned
PyObject* code_name = nullptr;  // "__code__", interned
PyObject* table_names[3] = {nullptr, nullptr, nullptr};  // "_parameters", "_buffers", "_modules"
PyObject* object_getattribute = nullptr;  // object.__getattribute__ (a slot wrapper)
getter instance_dict_getter = nullptr;  // what a Python class's `__dict__` descriptor calls

// `container[key]` (a new reference; nullptr with an exception, a KeyError for a missing key).
PyObject* read_item(PyObject* container, PyObject* key) {
  if (!PyDict_CheckExact(container)) {
    return PyObject_GetItem(container, key);
  }
  PyObject* found = PyDict_GetItemWithError(container, key);
  if (found == nullptr && !PyErr_Occurred()) {
    PyErr_SetObject(PyExc_KeyError, key);
  }
  return Py_XNewRef(found);
}

// What `step` reads from `value` (a new reference; nullptr with an exception).
PyObject* take_step(PyObject* value, const Step& step) {
  switch (step.how) {
    case How::kItem:
      return read_item(value, step.name);
    case How::kInstanceDict:
      return PyObject_GenericGetAttr(value, step.name);
    case How::kAttribute:
      break;
  }
  return PyObject_GetAttr(value, step.name);
}

// `value` (a new reference, taken) followed along steps[first:] (a new reference; nullptr with
// an exception, also when `value` is nullptr).
PyObject* follow(PyObject* value, const std::vector<Step>& steps, size_t first) {
  for (size_t i = first; value != nullptr && i < steps.size(); i++) {
    PyObject* next = take_step(value, steps[i]);
    Py_DECREF(value);
    value = next;
  }
  return value;
}

// 1: `tuple(value) == keys`; 0: not; -1: an error.
int same_keys(PyObject* value, PyObject* keys) {
  if (!PyDict_CheckExact(value)) {
    PyObject* items = PySequence_Tuple(value);
    int equal = items == nullptr ? -1 : PyObject_RichCompareBool(items, keys, Py_EQ);
    Py_XDECREF(items);
    return equal;
  }
  if (PyDict_GET_SIZE(value) != PyTuple_GET_SIZE(keys)) {
    return 0;
  }
  Py_ssize_t position = 0, index = 0;
  PyObject *key, *entry;
  while (PyDict_Next(value, &position, &key, &entry)) {
    int equal = PyObject_RichCompareBool(key, PyTuple_GET_ITEM(keys, index++), Py_EQ);
    if (equal != 1) {
      return equal;
    }
  }
  return 1;
}

// 1: `value is ref()` (a dead reference gives None); 0: not; -1: an error.
int same_as_referent(PyObject* value, PyObject* ref) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* referent = nullptr;
  if (PyWeakref_GetRef(ref, &referent) < 0) {
    return -1;
  }
  bool same = value == (referent == nullptr ? Py_None : referent);
  Py_XDECREF(referent);
  return same;
#else
  PyObject* referent = PyWeakref_GetObject(ref);  // borrowed; None when dead
  return referent == nullptr ? -1 : value == referent;
#endif
}

// 1: `value.__code__ is code`; 0: not; -1: an error (no `__code__`: an AttributeError).
int same_code(PyObject* value, PyObject* code) {
  if (PyFunction_Check(value)) {  // functions cannot be subclassed: `__code__` is the slot
    return PyFunction_GET_CODE(value) == code;
  }
  PyObject* found = PyObject_GetAttr(value, code_name);
  if (found == nullptr) {
    return -1;
  }
  Py_DECREF(found);
  return found == code;
}

// 1: `value == 0.0 and copysign(1.0, value) == copysign(1.0, zero)`; 0: not; -1: an error.
int same_zero(PyObject* value, PyObject* zero) {
  PyObject* result = PyObject_RichCompare(value, zero, Py_EQ);  // `==` as Python evaluates it
  if (result == nullptr) {
    return -1;
  }
  int equal = PyObject_IsTrue(result);
  Py_DECREF(result);
  if (equal != 1) {
    return equal;
  }
  double number = PyFloat_AsDouble(value);
  if (number == -1.0 && PyErr_Occurred()) {
    return -1;
  }
  return std::signbit(number) == std::signbit(PyFloat_AS_DOUBLE(zero));
}

struct ModuleCheck;
PyObject* run_module_check(ModuleCheck* self, PyObject* module);

// 1: `value` passes `check`'s comparison; 0: fails; -1: an error.
int compare(const MemberCheck& check, PyObject* value) {
  if (check.type != nullptr && Py_TYPE(value) != check.type) {
    return 0;
  }
  PyObject* result = nullptr;
  switch (check.op) {
    case Op::kType:
      return 1;
    case Op::kIs:
      return value == check.expected;
    case Op::kIsNot:
      return value != check.expected;
    case Op::kIsReferent:
      return same_as_referent(value, check.expected);
    case Op::kCode:
      return same_code(value, check.expected);
    case Op::kZero:
      return same_zero(value, check.expected);
    case Op::kEmpty: {
      int truth = PyObject_IsTrue(value);
      return truth < 0 ? -1 : truth == 0;
    }
    case Op::kNotIn: {
      int found = PySequence_Contains(value, check.expected);
      return found < 0 ? -1 : found == 0;
    }
    case Op::kKeys:
      return same_keys(value, check.expected);
    case Op::kEqual:
      result = PyObject_RichCompare(value, check.expected, Py_EQ);
      break;
    case Op::kTensor:
      result = run_tensor_check(reinterpret_cast<TensorCheck*>(check.expected), value);
      break;
    case Op::kModule:
      result = run_module_check(reinterpret_cast<ModuleCheck*>(check.expected), value);
      break;
  }
  if (result == nullptr) {
    return -1;
  }
  int truth = PyObject_IsTrue(result);
  Py_DECREF(result);
  return truth;
}

// 1, 0 or -1 as compare(), for the value `check` reaches from `value` (a new reference, taken;
// nullptr: reading its first step failed) along its steps after the first.
int check_reached(const MemberCheck& check, PyObject* value) {
  value = follow(value, check.steps, 1);
  if (value == nullptr) {
    return -1;
  }
  int verdict = compare(check, value);
  Py_DECREF(value);
  return verdict;
}

// One entry of a `members` tuple: (steps, type or None, op, expected), steps a non-empty tuple
// of (name, how) pairs, how 0 (`.name`), 1 (`[name]`) or 2 (the instance dict); op one of "type", "is", "is not", "is ref" (expected a weak reference:
// `v is ref()`), "code" (`v.__code__ is expected`), "==", "zero" (`v == 0.0` with expected's
// sign), "empty" (`not v`), "not in" (`expected not in v`), "keys" (expected a tuple: `tuple(v)
// == expected`), "tensor" (expected a TensorCheck) and "module" (expected a ModuleCheck: a
// submodule's own checks). The objects stay owned by the tuple.
bool read_member(PyObject* entry, MemberCheck& check) {
  static const struct {
    const char* name;
    Op op;
  } ops[] = {
      {"type", Op::kType},
      {"is", Op::kIs},
      {"is not", Op::kIsNot},
      {"is ref", Op::kIsReferent},
      {"code", Op::kCode},
      {"==", Op::kEqual},
      {"zero", Op::kZero},
      {"empty", Op::kEmpty},
      {"not in", Op::kNotIn},
      {"keys", Op::kKeys},
      {"tensor", Op::kTensor},
      {"module", Op::kModule}};
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(entry, 0)) ||
      PyTuple_GET_SIZE(PyTuple_GET_ITEM(entry, 0)) == 0 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 2))) {
    PyErr_SetString(PyExc_TypeError, "members must hold (steps, type, op, expected) tuples");
    return false;
  }
  PyObject* steps = PyTuple_GET_ITEM(entry, 0);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps); i++) {
    PyObject* step = PyTuple_GET_ITEM(steps, i);
    long how = -1;
    if (PyTuple_Check(step) && PyTuple_GET_SIZE(step) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(step, 1))) {
      how = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
    }
    if (how < 0 || how > 2) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, "members: a step must be a (name, how) pair, how 0, 1 or 2");
      return false;
    }
    if (how != 1 && !PyUnicode_Check(PyTuple_GET_ITEM(step, 0))) {
      PyErr_SetString(PyExc_TypeError, "members: an attribute step needs a string");
      return false;
    }
    check.steps.push_back(Step{PyTuple_GET_ITEM(step, 0), static_cast<How>(how)});
  }
  PyObject* type = PyTuple_GET_ITEM(entry, 1);
  if (type != Py_None && !PyType_Check(type)) {
    PyErr_SetString(PyExc_TypeError, "members: a member's type must be a class or None");
    return false;
  }
  check.type = type == Py_None ? nullptr : reinterpret_cast<PyTypeObject*>(type);
  check.expected = PyTuple_GET_ITEM(entry, 3);
  const char* op = PyUnicode_AsUTF8(PyTuple_GET_ITEM(entry, 2));
  if (op == nullptr) {
    return false;
  }
  for (const auto& known : ops) {
    if (strcmp(op, known.name) != 0) {
      continue;
    }
    check.op = known.op;
    const char* wrong = nullptr;
    if (check.op == Op::kIsReferent && !PyWeakref_CheckRef(check.expected)) {
      wrong = "an 'is ref' check needs a weak reference";
    } else if (check.op == Op::kZero && !PyFloat_CheckExact(check.expected)) {
      wrong = "a 'zero' check needs a float";
    } else if (check.op == Op::kKeys && !PyTuple_CheckExact(check.expected)) {
      wrong = "a 'keys' check needs a tuple of keys";
    } else if (check.op == Op::kTensor && Py_TYPE(check.expected) != &TensorCheckType) {
      wrong = "a 'tensor' check needs a TensorCheck";
    } else if (check.op == Op::kModule && Py_TYPE(check.expected) != &ModuleCheckType) {
      wrong = "a 'module' check needs a ModuleCheck";
    }
    if (wrong != nullptr) {
      PyErr_Format(PyExc_TypeError, "members: %s", wrong);
      return false;
    }
    return true;
  }
  PyErr_Format(PyExc_ValueError, "members: unknown op %R", PyTuple_GET_ITEM(entry, 2));
  return false;
}

bool read_members(PyObject* members, std::vector<MemberCheck>& checks) {
  if (!PyTuple_Check(members)) {
    PyErr_SetString(PyExc_TypeError, "members must be a tuple");
    return false;
  }
  checks.resize(PyTuple_GET_SIZE(members));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members); i++) {
    if (!read_member(PyTuple_GET_ITEM(members, i), checks[i])) {
      return false;
    }
  }
  return true;
}

// -- ModuleCheck -----------------------------------------------------------------------------

struct ModuleCheck {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyTypeObject* type;  // `type(m) is T`
  PyObject* members;  // the tuple the checks below were read from (owns their objects)
  std::vector<MemberCheck> checks;
  // tuple of (name, class dicts) pairs: m has no attribute `name`, as nn.Module answers it (not
  // in its __dict__, its parameter, buffer or module table, nor in any of those class dicts)
  PyObject* missing;
  // While T's version tag is `version` (no class in T's MRO changed since the check was built),
  // the attributes read first are known to be plain instance-dict entries; 0: always ask getattr.
  unsigned int version;
};

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

unsigned int fast_path_version(PyTypeObject* type, PyObject* missing, const std::vector<MemberCheck>& checks) {
  if (_PyType_Lookup(type, getattribute_name) != object_getattribute || !plain_instance_dict(type)) {
    return 0;
  }
  for (PyObject* table : table_names) {
    if (PyTuple_GET_SIZE(missing) > 0 && !plain_attribute(type, table)) {
      return 0;
    }
  }
  for (const MemberCheck& check : checks) {
    const Step& first = check.steps[0];
    if (first.how == How::kAttribute && first.name != dict_name && !plain_attribute(type, first.name)) {
      return 0;
    }
  }
  // the lookups above gave the type a version tag (0 if none could be assigned)
  return type->tp_version_tag;
}

// `getattr(module, name)` (a new reference, or nullptr with an exception set). `dict` is the
// instance dict when the fast path holds, else nullptr.
PyObject* read_attribute(PyObject* module, PyObject* dict, PyObject* name) {
  if (dict != nullptr) {
    if (name == dict_name) {
      return Py_NewRef(dict);
    }
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

// 1: `name` (of a (name, class dicts) pair) is in none of `module`'s __dict__, tables and those
// class dicts; 0: it is in one; -1: an error.
int lacks_attribute(PyObject* module, PyObject* dict, PyObject* pair) {
  PyObject* name = PyTuple_GET_ITEM(pair, 0);
  PyObject* class_dicts = PyTuple_GET_ITEM(pair, 1);
  int found = 0;
  for (PyObject* where : {dict_name, table_names[0], table_names[1], table_names[2]}) {
    PyObject* table = read_attribute(module, dict, where);
    if (table == nullptr) {
      return -1;
    }
    found = PySequence_Contains(table, name);
    Py_DECREF(table);
    if (found != 0) {
      return found < 0 ? -1 : 0;
    }
  }
  for (Py_ssize_t i = 0; found == 0 && i < PyTuple_GET_SIZE(class_dicts); i++) {
    found = PySequence_Contains(PyTuple_GET_ITEM(class_dicts, i), name);
  }
  return found < 0 ? -1 : found == 0;
}

PyObject* module_check_body(ModuleCheck* self, PyObject* module, PyObject* dict) {
  for (const MemberCheck& check : self->checks) {
    const Step& first = check.steps[0];
    // the instance dict, or an attribute in it, read directly on the fast path
    bool direct = dict != nullptr && first.how != How::kItem;
    PyObject* value = direct ? read_attribute(module, dict, first.name) : take_step(module, first);
    int verdict = check_reached(check, value);
    if (verdict != 1) {
      return verdict < 0 ? nullptr : answer(false);
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->missing); i++) {
    int verdict = lacks_attribute(module, dict, PyTuple_GET_ITEM(self->missing, i));
    if (verdict != 1) {
      return verdict < 0 ? nullptr : answer(false);
    }
  }
  return answer(true);
}

// The answer of `self` for `module` (a new reference to True or False; nullptr with an exception).
PyObject* run_module_check(ModuleCheck* self, PyObject* module) {
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

PyObject* module_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "ModuleCheck takes one positional argument");
    return nullptr;
  }
  return run_module_check(reinterpret_cast<ModuleCheck*>(callable), args[0]);
}

bool missing_pairs(PyObject* missing) {
  bool ok = PyTuple_Check(missing);
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(missing); i++) {
    PyObject* pair = PyTuple_GET_ITEM(missing, i);
    ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 && PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) &&
        PyTuple_Check(PyTuple_GET_ITEM(pair, 1));
  }
  if (!ok) {
    PyErr_SetString(PyExc_TypeError, "ModuleCheck: missing must be a tuple of (name, tuple of class dicts) pairs");
  }
  return ok;
}

PyObject* module_check_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"cls", "members", "missing", nullptr};
  PyObject *type, *members, *missing;
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "O!OO:ModuleCheck", const_cast<char**>(names), &PyType_Type, &type, &members, &missing)) {
    return nullptr;
  }
  std::vector<MemberCheck> checks;
  if (!missing_pairs(missing) || !read_members(members, checks)) {
    return nullptr;
  }
  auto* self = reinterpret_cast<ModuleCheck*>(cls->tp_alloc(cls, 0));
  if (self == nullptr) {
    return nullptr;
  }
  new (&self->checks) std::vector<MemberCheck>(std::move(checks));
  self->vectorcall = module_check_call;
  self->type = reinterpret_cast<PyTypeObject*>(Py_NewRef(type));
  self->members = Py_NewRef(members);
  self->missing = Py_NewRef(missing);
  self->version = fast_path_version(self->type, missing, self->checks);
  return reinterpret_cast<PyObject*>(self);
}

int module_check_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<ModuleCheck*>(obj);
  Py_VISIT(self->type);
  Py_VISIT(self->members);
  Py_VISIT(self->missing);
  return 0;
}

int module_check_clear(PyObject* obj) {
  auto* self = reinterpret_cast<ModuleCheck*>(obj);
  self->checks.clear();  // they point into `members`
  Py_CLEAR(self->type);
  Py_CLEAR(self->members);
  Py_CLEAR(self->missing);
  return 0;
}

void module_check_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<ModuleCheck*>(obj);
  PyObject_GC_UnTrack(obj);
  module_check_clear(obj);
  self->checks.~vector();
  Py_TYPE(obj)->tp_free(obj);
}

// -- RootCheck -------------------------------------------------------------------------------

// Checks on values reached from one object the guard function holds fixed: the names in a
// module's globals dict (`g['torch'] is ref()`, `g['f'].__code__ is code`) or a class's
// attributes (`C.forward is ref()`). Called with no arguments.
struct RootCheck {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* root;
  PyObject* members;  // the tuple the checks below were read from (owns their objects)
  std::vector<MemberCheck> checks;
};

PyObject* root_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<RootCheck*>(callable);
  if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "RootCheck takes no arguments");
    return nullptr;
  }
  if (self->root == nullptr) {  // cleared
    return answer(false);
  }
  for (const MemberCheck& check : self->checks) {
    PyObject* value = take_step(self->root, check.steps[0]);
    int verdict = check_reached(check, value);
    if (verdict != 1) {
      return verdict < 0 ? nullptr : answer(false);
    }
  }
  return answer(true);
}

PyObject* root_check_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"root", "members", nullptr};
  PyObject *root, *members;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:RootCheck", const_cast<char**>(names), &root, &members)) {
    return nullptr;
  }
  std::vector<MemberCheck> checks;
  if (!read_members(members, checks)) {
    return nullptr;
  }
  auto* self = reinterpret_cast<RootCheck*>(cls->tp_alloc(cls, 0));
  if (self == nullptr) {
    return nullptr;
  }
  new (&self->checks) std::vector<MemberCheck>(std::move(checks));
  self->vectorcall = root_check_call;
  self->root = Py_NewRef(root);
  self->members = Py_NewRef(members);
  return reinterpret_cast<PyObject*>(self);
}

int root_check_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<RootCheck*>(obj);
  Py_VISIT(self->root);
  Py_VISIT(self->members);
  return 0;
}

int root_check_clear(PyObject* obj) {
  auto* self = reinterpret_cast<RootCheck*>(obj);
  self->checks.clear();  // they point into `members`
  Py_CLEAR(self->root);
  Py_CLEAR(self->members);
  return 0;
}

void root_check_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<RootCheck*>(obj);
  PyObject_GC_UnTrack(obj);
  root_check_clear(obj);
  self->checks.~vector();
  Py_TYPE(obj)->tp_free(obj);
}

PyTypeObject RootCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The lookups a plain Python class answers: object.__getattribute__, and the getter of the
// `__dict__` descriptor of a class statement's class (read off a class made here).
bool find_plain_lookups() {
  dict_name = PyUnicode_InternFromString("__dict__");
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  code_name = PyUnicode_InternFromString("__code__");
  table_names[0] = PyUnicode_InternFromString("_parameters");
  table_names[1] = PyUnicode_InternFromString("_buffers");
  table_names[2] = PyUnicode_InternFromString("_modules");
  if (dict_name == nullptr || getattribute_name == nullptr || code_name == nullptr || table_names[0] == nullptr ||
      table_names[1] == nullptr || table_names[2] == nullptr) {
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
    destructor dealloc,
    traverseproc traverse,
    inquiry clear) {
  type.tp_name = name;
  type.tp_doc = doc;
  type.tp_basicsize = size;
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC;
  type.tp_traverse = traverse;
  type.tp_clear = clear;
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
          tensor_check_dealloc,
          tensor_check_traverse,
          tensor_check_clear) ||
      !ready(
          ModuleCheckType,
          "stenograph.ModuleCheck",
          "ModuleCheck(cls, members, missing): called with a value, whether its type is cls, each (name, "
          "class dicts) of missing names no attribute of it (not in its __dict__, _parameters, _buffers, "
          "_modules or those dicts) and each (steps, type, op, expected) of members holds for the value its "
          "steps ((name, how) pairs: .name, [name] or the instance dict) reach: of exactly type (None: any), and passing op "
          "('type', 'is', 'is not', 'is ref', 'code', '==', 'zero', 'empty', 'not in', 'keys', 'tensor', "
          "'module').",
          sizeof(ModuleCheck),
          offsetof(ModuleCheck, vectorcall),
          module_check_new,
          module_check_dealloc,
          module_check_traverse,
          module_check_clear) ||
      !ready(
          RootCheckType,
          "stenograph.RootCheck",
          "RootCheck(root, members): called with no arguments, whether each (steps, type, op, expected) of "
          "members holds for the value its steps reach from root, as in ModuleCheck.",
          sizeof(RootCheck),
          offsetof(RootCheck, vectorcall),
          root_check_new,
          root_check_dealloc,
          root_check_traverse,
          root_check_clear)) {
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
      PyModule_AddObjectRef(module, "ModuleCheck", reinterpret_cast<PyObject*>(&ModuleCheckType)) < 0 ||
      PyModule_AddObjectRef(module, "RootCheck", reinterpret_cast<PyObject*>(&RootCheckType)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
