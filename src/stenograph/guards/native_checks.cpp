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
// On Python 3.12+ a ModuleCheck called by a guard function remembers a tree that passed: the dicts
// it read are watched (PyDict_Watch), and while none of them changed, the next call re-reads only
// what a dict watcher cannot see (each object's class and instance dict, tensors' metadata,
// functions' code, values that can change in place); see "Remembered trees" below.
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
#include <memory>
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

// Attributes of functions, methods and cells that a guard reads often (the code, defaults and
// closure cells of the functions a trace inlined), read from the object's fields: the same value
// Python's lookup gives (these types cannot be subclassed, and their descriptors are data
// descriptors, which an instance dict cannot shadow), without the lookup.
enum class Slot { kNone, kCode, kDefaults, kKwDefaults, kClosure, kGlobals, kCellContents, kFunc, kSelf };

struct Step {
  PyObject* name;  // an attribute name, a key, or "__dict__"
  How how;
  Slot slot;  // for an attribute of a function, method or cell; kNone: ask getattr
};

// A name and what it stands for, in the tables of slots and ops below.
template <typename Meaning>
struct Named {
  const char* name;
  Meaning meaning;
};

// Whether `name` is in `table`, with its meaning in `*meaning`.
template <typename Meaning, size_t N>
bool look_up(const Named<Meaning> (&table)[N], const char* name, Meaning* meaning) {
  for (const Named<Meaning>& known : table) {
    if (strcmp(name, known.name) == 0) {
      *meaning = known.meaning;
      return true;
    }
  }
  return false;
}

// The slot an attribute step named `name` reads (kNone for other names).
Slot slot_named(PyObject* name) {
  static const Named<Slot> slots[] = {
      {"__code__", Slot::kCode},
      {"__defaults__", Slot::kDefaults},
      {"__kwdefaults__", Slot::kKwDefaults},
      {"__closure__", Slot::kClosure},
      {"__globals__", Slot::kGlobals},
      {"cell_contents", Slot::kCellContents},
      {"__func__", Slot::kFunc},
      {"__self__", Slot::kSelf}};
  const char* text = PyUnicode_AsUTF8(name);
  Slot slot = Slot::kNone;
  if (text == nullptr) {
    PyErr_Clear();  // (a name no slot has)
  } else {
    look_up(slots, text, &slot);
  }
  return slot;
}

// `value.<slot>` read from its fields (a new reference; nullptr with an exception, as Python's
// for an empty cell); `*read` false when `value` is not of the type the slot belongs to.
PyObject* read_slot(PyObject* value, Slot slot, bool* read) {
  PyObject* found = nullptr;
  *read = true;
  if (PyFunction_Check(value)) {
    switch (slot) {
      case Slot::kCode:
        found = PyFunction_GET_CODE(value);
        break;
      case Slot::kDefaults:
        found = PyFunction_GET_DEFAULTS(value);
        break;
      case Slot::kKwDefaults:
        found = PyFunction_GET_KW_DEFAULTS(value);
        break;
      case Slot::kClosure:
        found = PyFunction_GET_CLOSURE(value);
        break;
      case Slot::kGlobals:
        found = PyFunction_GET_GLOBALS(value);
        break;
      default:
        *read = false;
        return nullptr;
    }
    return Py_NewRef(found == nullptr ? Py_None : found);
  }
  if (PyCell_Check(value) && slot == Slot::kCellContents) {
    found = PyCell_GET(value);
    if (found == nullptr) {
      PyErr_SetString(PyExc_ValueError, "Cell is empty");
    }
    return Py_XNewRef(found);
  }
  if (PyMethod_Check(value) && (slot == Slot::kFunc || slot == Slot::kSelf)) {
    return Py_NewRef(slot == Slot::kFunc ? PyMethod_GET_FUNCTION(value) : PyMethod_GET_SELF(value));
  }
  *read = false;
  return nullptr;
}

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
  if (step.slot != Slot::kNone) {
    bool read;
    PyObject* found = read_slot(value, step.slot, &read);
    if (read) {
      return found;
    }
  }
  return PyObject_GetAttr(value, step.name);
}

struct TreeMemo;
bool pin_step(TreeMemo* memo, PyObject* value, const Step& step);

// `value` (a new reference, taken) followed along steps[first:] (a new reference; nullptr with
// an exception, also when `value` is nullptr). With a `memo` and `*pinned` true (`value` is held
// by a watched dict), each step that reads a dict entry is recorded, and one that does not sets
// `*pinned` false.
PyObject* follow(
    PyObject* value, const std::vector<Step>& steps, size_t first, TreeMemo* memo = nullptr, bool* pinned = nullptr) {
  for (size_t i = first; value != nullptr && i < steps.size(); i++) {
    if (memo != nullptr && *pinned) {
      *pinned = pin_step(memo, value, steps[i]);
    }
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
int module_verdict(ModuleCheck* self, PyObject* module, TreeMemo* memo);

// 1: `value` passes `check`'s comparison; 0: fails; -1: an error. A submodule's check records
// into `memo` when it is not nullptr.
int compare(const MemberCheck& check, PyObject* value, TreeMemo* memo = nullptr) {
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
      return module_verdict(reinterpret_cast<ModuleCheck*>(check.expected), value, memo);
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
  static const Named<Op> ops[] = {
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
    PyObject* name = PyTuple_GET_ITEM(step, 0);
    check.steps.push_back(Step{name, static_cast<How>(how), how == 0 ? slot_named(name) : Slot::kNone});
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
  if (!look_up(ops, op, &check.op)) {
    PyErr_Format(PyExc_ValueError, "members: unknown op %R", PyTuple_GET_ITEM(entry, 2));
    return false;
  }
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

// -- Remembered trees --------------------------------------------------------------------------
//
// A model's module tree is checked on every call, and between the calls of a training or
// inference loop nothing the check reads usually changes. On Python 3.12+ the dicts a passing
// check read are watched, and any event on a watched dict (an entry set or deleted, a clear, its
// deallocation) advances `watch_epoch`, as does setting any function's `__code__`, `__defaults__`
// or `__kwdefaults__`. A ModuleCheck called by a guard function remembers from a
// call that passed what no dict watcher sees: each object's class, the class's version tag and
// the object's instance dict (`__class__`, a class attribute and `__dict__` can be assigned), the
// values whose verdict can change in place (a tensor's metadata, a function's `__code__`, `==` on
// a mutable value), and the members reached some other way than through dict entries (a
// property, `__getattr__`), checked again in full. While the epoch is the remembered one, a call
// re-checks only those; after any change it runs the full check. A tree is remembered when its
// full check passes with nothing changed since the previous full check of the same module, so a
// loop that changes a watched dict on every call pays the full check and nothing more.

uint64_t watch_epoch = 0;
int dict_watcher = -1;  // ours; -1: none (Python 3.11, or every watcher slot taken)
int function_watcher = -1;  // the same for functions

#if PY_VERSION_HEX >= 0x030C0000
int on_watched_dict_event(PyDict_WatchEvent, PyObject*, PyObject*, PyObject*) {
  watch_epoch++;
  return 0;
}

int on_function_event(PyFunction_WatchEvent event, PyFunctionObject*, PyObject*) {
  if (event != PyFunction_EVENT_CREATE && event != PyFunction_EVENT_DESTROY) {
    watch_epoch++;
  }
  return 0;
}
#endif

// Borrowed: while the epoch holds, a watched dict (or the caller, for the root) holds each.
struct KnownObject {
  PyObject* object;
  PyTypeObject* type;
  unsigned int version;  // the class's version tag
  PyObject* dict;  // its instance dict
};

// A class an attribute was read from (borrowed, as a KnownObject), with its version tag: any
// change to it or a class in its MRO gives it another.
struct KnownClass {
  PyTypeObject* type;
  unsigned int version;
};

// A closure cell read (borrowed, as a KnownObject), with what it held: a cell's contents can be
// set without any event. The contents are held, so that their address cannot be reused.
struct KnownCell {
  PyObject* cell;
  PyObject* contents;  // a strong reference; nullptr: the cell was empty
};

struct Recheck {
  PyObject* value;
  const MemberCheck* check;
};

// A member of `owner` checked again in full from `module` (instance dict `dict`); `check`
// nullptr: the owner's missing names; `owner` nullptr: a RootCheck's member, from its root.
struct Rerun {
  ModuleCheck* owner;
  PyObject* module;
  PyObject* dict;
  const MemberCheck* check;
};

struct TreeMemo {
  uint64_t epoch = 0;
  PyObject* root = nullptr;  // compared by address only
  bool complete = true;  // false: a dict could not be watched or a module is off the fast path
  std::vector<KnownObject> objects;
  std::vector<KnownClass> classes;
  std::vector<KnownCell> cells;
  std::vector<Recheck> rechecks;
  std::vector<Rerun> reruns;

  TreeMemo() = default;
  TreeMemo(const TreeMemo&) = delete;
  TreeMemo& operator=(const TreeMemo&) = delete;
  ~TreeMemo() {
    for (const KnownCell& known : cells) {
      Py_XDECREF(known.contents);
    }
  }
};

void watch(TreeMemo* memo, PyObject* dict) {
#if PY_VERSION_HEX >= 0x030C0000
  if (PyDict_Watch(dict_watcher, dict) == 0) {
    return;
  }
  PyErr_Clear();
#endif
  memo->complete = false;
}

// Whether `__class__` cannot be assigned on `value`: an instance of a builtin or extension class
// other than a module object.
bool fixed_class(PyObject* value) {
  return !(Py_TYPE(value)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyModule_Check(value);
}

// Whether `value` is None, a bool, a number, a string or bytes, or a tuple of such values.
bool immutable(PyObject* value, int depth = 0) {
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) ||
      PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) || PyBytes_CheckExact(value)) {
    return true;
  }
  if (!PyTuple_CheckExact(value) || depth > 8) {
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); i++) {
    if (!immutable(PyTuple_GET_ITEM(value, i), depth + 1)) {
      return false;
    }
  }
  return true;
}

// Whether the verdict of `check` on `value` (held by a watched dict) holds while no watched dict
// changes; a dict whose entries it inspects is watched.
bool settled(const MemberCheck& check, PyObject* value, TreeMemo* memo) {
  if (check.type != nullptr && !fixed_class(value)) {
    return false;
  }
  switch (check.op) {
    case Op::kType:
    case Op::kIs:
    case Op::kIsNot:
    case Op::kIsReferent:
      return true;
    case Op::kCode:  // setting a function's `__code__` is a watched event
      return function_watcher >= 0 && PyFunction_Check(value);
    case Op::kEqual:
    case Op::kZero:
      return immutable(value) && immutable(check.expected);
    case Op::kEmpty:
    case Op::kNotIn:
    case Op::kKeys:
      // an OrderedDict's order can change without an event: only its size and keys are settled
      if (PyDict_CheckExact(value) || (check.op != Op::kKeys && PyODict_CheckExact(value))) {
        watch(memo, value);
        return true;
      }
      return immutable(value);
    default:
      return false;
  }
}

// Whether `m.__dict__` is Python's own instance dict (the `__dict__` descriptor every class
// gets, not a property of the class's own).
bool plain_instance_dict(PyTypeObject* type) {
  PyObject* descriptor = _PyType_Lookup(type, dict_name);
  return descriptor != nullptr && Py_TYPE(descriptor) == &PyGetSetDescr_Type &&
      reinterpret_cast<PyGetSetDescrObject*>(descriptor)->d_getset->get == instance_dict_getter;
}

// Records `object` with its instance dict when its class's `__dict__` is Python's own; false if not.
bool know_object(TreeMemo* memo, PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  if (!plain_instance_dict(type) || type->tp_version_tag == 0) {
    return false;
  }
  PyObject* dict = PyObject_GenericGetDict(object, nullptr);
  if (dict == nullptr) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(dict);  // the object holds it
  memo->objects.push_back(KnownObject{object, type, type->tp_version_tag, dict});
  watch(memo, dict);
  return true;
}

// Records `type` with its version tag, once (an immutable type, `type` itself for one, cannot
// change); false if it has no tag (none could be given).
bool know_class(TreeMemo* memo, PyTypeObject* type) {
  if (type->tp_flags & Py_TPFLAGS_IMMUTABLETYPE) {
    return true;
  }
  if (type->tp_version_tag == 0) {
    return false;
  }
  for (const KnownClass& known : memo->classes) {
    if (known.type == type) {
      return true;
    }
  }
  memo->classes.push_back(KnownClass{type, type->tp_version_tag});
  return true;
}

// Whether `getattr(value, name)` is what the MRO of `value`, a class, holds under `name` (and
// stays so while its version tag and its metaclass's hold): type's own attribute lookup, no
// attribute of that name on the metaclass, and the one found not bound on the way (a function,
// whose `__get__` without an instance gives itself, or an object with no `__get__`). Records
// the class and its metaclass.
bool pin_class_attribute(TreeMemo* memo, PyObject* value, PyObject* name) {
  PyTypeObject* meta = Py_TYPE(value);
  if (!PyType_Check(value) || meta->tp_getattro != PyType_Type.tp_getattro || _PyType_Lookup(meta, name) != nullptr) {
    return false;
  }
  auto* cls = reinterpret_cast<PyTypeObject*>(value);
  PyObject* found = _PyType_Lookup(cls, name);
  if (found == nullptr || (Py_TYPE(found)->tp_descr_get != nullptr && !PyFunction_Check(found))) {
    return false;
  }
  return know_class(memo, cls) && know_class(memo, meta);
}

// Whether the field `slot` of `value` stays as it is while the memo holds: a function's closure
// and globals and a method's function and instance cannot be set, a function's code and defaults
// only with a watched event; a cell's contents are recorded.
bool pin_slot(TreeMemo* memo, PyObject* value, Slot slot) {
  if (PyFunction_Check(value)) {
    switch (slot) {
      case Slot::kClosure:
      case Slot::kGlobals:
        return true;
      case Slot::kCode:
      case Slot::kDefaults:
      case Slot::kKwDefaults:
        return function_watcher >= 0;
      default:
        return false;
    }
  }
  if (PyMethod_Check(value)) {
    return slot == Slot::kFunc || slot == Slot::kSelf;
  }
  if (PyCell_Check(value) && slot == Slot::kCellContents) {
    memo->cells.push_back(KnownCell{value, Py_XNewRef(PyCell_GET(value))});
    return true;
  }
  return false;
}

// Whether what `step` reads from `value` stays as it is while the memo holds: an entry of a
// dict now watched (an item of a dict, a plain instance dict), an item of a tuple, a field of a
// function, method or cell, or a class's attribute.
bool pin_step(TreeMemo* memo, PyObject* value, const Step& step) {
  switch (step.how) {
    case How::kItem:
      if (PyTuple_CheckExact(value)) {
        return true;
      }
      if (!PyDict_CheckExact(value)) {
        return false;
      }
      watch(memo, value);
      return true;
    case How::kInstanceDict:
      return know_object(memo, value);
    case How::kAttribute:
      if (step.slot != Slot::kNone) {
        return pin_slot(memo, value, step.slot);
      }
      return pin_class_attribute(memo, value, step.name);
  }
  return false;
}

// What a ModuleCheck or RootCheck remembers between a guard function's calls.
struct Remembrance {
  std::unique_ptr<TreeMemo> memo;  // the tree remembered from a call that passed
  uint64_t last_epoch = UINT64_MAX;  // the epoch of the last full check as a guard function's call
  PyObject* last_root = nullptr;  // and what it checked (compared by address only)
};

// 1, 0 or -1 as compare(), for `check` on `value` (a new reference, taken; nullptr: reading the
// first step failed) and the values its later steps reach, recording into `memo` what a call
// while the memo holds must read again: `rerun` when a step is not `pinned` to a watched dict or
// a known class, else the value when its verdict is not settled.
int recorded_verdict(const MemberCheck& check, PyObject* value, bool pinned, TreeMemo* memo, const Rerun& rerun) {
  value = follow(value, check.steps, 1, memo, &pinned);
  if (value == nullptr) {
    return -1;
  }
  TreeMemo* nested = nullptr;
  if (!pinned) {
    memo->reruns.push_back(rerun);
  } else if (check.op == Op::kModule) {
    nested = memo;  // the submodule's check records its own members
  } else if (!settled(check, value, memo)) {
    memo->rechecks.push_back(Recheck{value, &check});
  }
  int verdict = compare(check, value, nested);
  Py_DECREF(value);
  return verdict;
}

// 1, 0 or -1 as compare(), for `check`, a member of a RootCheck, on its `root`; recorded into
// `memo` when it is not nullptr.
int check_root_member(PyObject* root, const MemberCheck& check, TreeMemo* memo) {
  bool pinned = memo != nullptr && pin_step(memo, root, check.steps[0]);
  PyObject* value = take_step(root, check.steps[0]);
  if (memo == nullptr) {
    return check_reached(check, value);
  }
  return recorded_verdict(check, value, pinned, memo, Rerun{nullptr, root, nullptr, &check});
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
  // Whether the attributes read first are plain instance-dict entries, as found when T's version
  // tag was `version` (no class in T's MRO changed since); if not, or 0, getattr is asked.
  unsigned int version;
  bool fast;
  Remembrance remembrance;
};

// Whether `getattr(m, name)` for an instance m of `type` is m's instance-dict entry when it has
// one: `__getattribute__` is object's and no class in the MRO defines `name` (no descriptor).
bool plain_attribute(PyTypeObject* type, PyObject* name) {
  return _PyType_Lookup(type, name) == nullptr;
}

bool fast_path_holds(PyTypeObject* type, PyObject* missing, const std::vector<MemberCheck>& checks) {
  if (_PyType_Lookup(type, getattribute_name) != object_getattribute || !plain_instance_dict(type)) {
    return false;
  }
  for (PyObject* table : table_names) {
    if (PyTuple_GET_SIZE(missing) > 0 && !plain_attribute(type, table)) {
      return false;
    }
  }
  for (const MemberCheck& check : checks) {
    const Step& first = check.steps[0];
    if (first.how == How::kAttribute && first.name != dict_name && !plain_attribute(type, first.name)) {
      return false;
    }
  }
  return true;
}

// Whether the fast path holds for T as it is now, asked again when a class in T's MRO changed
// (any library setting an attribute on nn.Module does that).
bool on_fast_path(ModuleCheck* self) {
  if (self->version == 0 || self->type->tp_version_tag != self->version) {
    self->fast = fast_path_holds(self->type, self->missing, self->checks);
    self->version = self->type->tp_version_tag;  // the lookups gave T one (0 if none could be)
  }
  return self->fast && self->version != 0;
}

// `getattr(module, name)` (a new reference, or nullptr with an exception set). `dict` is the
// instance dict when the fast path holds, else nullptr; `*in_dict` tells whether the value is
// the dict or one of its entries.
PyObject* read_attribute(PyObject* module, PyObject* dict, PyObject* name, bool* in_dict = nullptr) {
  if (dict != nullptr) {
    PyObject* found = name == dict_name ? dict : PyDict_GetItemWithError(dict, name);
    if (found != nullptr) {
      if (in_dict != nullptr) {
        *in_dict = true;
      }
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

// 1: `module` lacks each of the missing names of `self`; 0: not; -1: an error.
int lacks_missing(const ModuleCheck* self, PyObject* module, PyObject* dict) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->missing); i++) {
    int verdict = lacks_attribute(module, dict, PyTuple_GET_ITEM(self->missing, i));
    if (verdict != 1) {
      return verdict;
    }
  }
  return 1;
}

// 1, 0 or -1 as compare(), for `check`, a member of `self`, on `module` (instance dict `dict` on
// the fast path, else nullptr); recorded into `memo` when it is not nullptr.
int check_member(ModuleCheck* self, const MemberCheck& check, PyObject* module, PyObject* dict, TreeMemo* memo) {
  const Step& first = check.steps[0];
  bool pinned = false;  // whether `value` is an entry of a watched dict
  // the instance dict, or an attribute in it, read directly on the fast path
  PyObject* value = dict != nullptr && first.how != How::kItem ? read_attribute(module, dict, first.name, &pinned)
                                                               : take_step(module, first);
  if (memo == nullptr) {
    return check_reached(check, value);
  }
  return recorded_verdict(check, value, pinned, memo, Rerun{self, module, dict, &check});
}

int module_check_body(ModuleCheck* self, PyObject* module, PyObject* dict, TreeMemo* memo) {
  for (const MemberCheck& check : self->checks) {
    int verdict = check_member(self, check, module, dict, memo);
    if (verdict != 1) {
      return verdict;
    }
  }
  if (memo != nullptr && PyTuple_GET_SIZE(self->missing) > 0) {
    memo->reruns.push_back(Rerun{self, module, dict, nullptr});
  }
  return lacks_missing(self, module, dict);
}

// 1: `module` passes `self`; 0: it fails; -1: an error. Recorded into `memo` when not nullptr.
int module_verdict(ModuleCheck* self, PyObject* module, TreeMemo* memo) {
  if (Py_TYPE(module) != self->type) {
    return 0;
  }
  if (!on_fast_path(self)) {
    if (memo != nullptr) {
      memo->complete = false;
    }
    return module_check_body(self, module, nullptr, nullptr);
  }
  PyObject* dict = PyObject_GenericGetDict(module, nullptr);
  if (dict == nullptr) {
    return -1;
  }
  if (memo != nullptr) {
    memo->objects.push_back(KnownObject{module, self->type, self->version, dict});
    watch(memo, dict);
  }
  int verdict = module_check_body(self, module, dict, memo);
  Py_DECREF(dict);
  return verdict;
}

#if defined(__GNUC__)
#define STENOGRAPH_PREFETCH(address) __builtin_prefetch(address)
#else
#define STENOGRAPH_PREFETCH(address) ((void)(address))
#endif

// Starts loading what the tensor rechecks read, one level of pointers per pass: the tensor
// objects and the TensorChecks, then the TensorImpls and the expected sizes and strides, then
// the autograd metadata (requires_grad), so that the cache misses of a tree's parameters
// overlap instead of following one another (after a backward pass, hardly any is cached).
void prefetch_tensors(const TreeMemo& memo) {
  auto plain = [](const Recheck& recheck) {
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(recheck.value));
    return recheck.check->op == Op::kTensor && (type == tensor_type || type == parameter_type);
  };
  for (const Recheck& recheck : memo.rechecks) {
    if (recheck.check->op == Op::kTensor) {
      STENOGRAPH_PREFETCH(recheck.value);
      STENOGRAPH_PREFETCH(recheck.check->expected);
    }
  }
  for (const Recheck& recheck : memo.rechecks) {
    if (plain(recheck)) {
      const char* impl = reinterpret_cast<const char*>(tensor_impl(recheck.value));
      STENOGRAPH_PREFETCH(impl);
      STENOGRAPH_PREFETCH(impl + 64);
      STENOGRAPH_PREFETCH(impl + 128);
      const auto* check = reinterpret_cast<const TensorCheck*>(recheck.check->expected);
      STENOGRAPH_PREFETCH(check->sizes.data());
      STENOGRAPH_PREFETCH(check->strides.data());
    }
  }
  for (const Recheck& recheck : memo.rechecks) {
    if (plain(recheck)) {
      STENOGRAPH_PREFETCH(tensor_impl(recheck.value)->autograd_meta());
    }
  }
}

// Whether nothing `memo` depends on has changed and what it re-reads passes. An error is
// cleared: the full check that follows meets it again. A recheck may run Python code (`==`, a
// tensor's Python fallback, a property); once it changed a watched dict, which may have freed an
// object the memo points to, nothing further is read.
bool memo_holds(const TreeMemo& memo, PyObject* module) {
  if (memo.epoch != watch_epoch || memo.root != module) {
    return false;
  }
  // classes first: an object or cell reached through a class attribute lives while it is unchanged
  for (const KnownClass& known : memo.classes) {
    if (known.type->tp_version_tag != known.version) {
      return false;
    }
  }
  for (const KnownCell& known : memo.cells) {
    if (PyCell_GET(known.cell) != known.contents) {
      return false;
    }
  }
  for (const KnownObject& known : memo.objects) {  // their headers, and the dict pointer before
    STENOGRAPH_PREFETCH(known.object);
    STENOGRAPH_PREFETCH(reinterpret_cast<const char*>(known.object) - 32);
  }
  for (const KnownObject& known : memo.objects) {
    if (Py_TYPE(known.object) != known.type || known.type->tp_version_tag != known.version) {
      return false;
    }
    PyObject* dict = PyObject_GenericGetDict(known.object, nullptr);
    if (dict == nullptr) {
      PyErr_Clear();
      return false;
    }
    Py_DECREF(dict);
    if (dict != known.dict) {
      return false;
    }
  }
  prefetch_tensors(memo);
  int verdict = 1;
  for (size_t i = 0; verdict == 1 && memo.epoch == watch_epoch && i < memo.rechecks.size(); i++) {
    verdict = compare(*memo.rechecks[i].check, memo.rechecks[i].value);
  }
  for (size_t i = 0; verdict == 1 && memo.epoch == watch_epoch && i < memo.reruns.size(); i++) {
    const Rerun& rerun = memo.reruns[i];
    if (rerun.owner == nullptr) {
      verdict = check_root_member(rerun.module, *rerun.check, nullptr);
    } else if (rerun.check == nullptr) {
      verdict = lacks_missing(rerun.owner, rerun.module, rerun.dict);
    } else {
      verdict = check_member(rerun.owner, *rerun.check, rerun.module, rerun.dict, nullptr);
    }
  }
  if (verdict < 0) {
    PyErr_Clear();
  }
  return verdict == 1 && memo.epoch == watch_epoch;
}

// 1: `root` passes; 0: it fails; -1: an error. From the memo while it holds; else by the full
// check `full(memo)`, remembered when it passes with nothing changed since the previous full
// check of the same root.
template <typename Full>
int remembered_verdict(Remembrance& remembrance, PyObject* root, Full full) {
  if (remembrance.memo != nullptr) {
    // held here while it is read: Python code a recheck runs may call this check again
    std::unique_ptr<TreeMemo> memo = std::move(remembrance.memo);
    bool holds = memo_holds(*memo, root);
    if (holds && remembrance.memo == nullptr) {
      remembrance.memo = std::move(memo);
    }
    if (holds) {
      return 1;
    }
  }
  remembrance.memo.reset();
  bool quiet = dict_watcher >= 0 && remembrance.last_epoch == watch_epoch && remembrance.last_root == root;
  uint64_t epoch = watch_epoch;
  remembrance.last_epoch = epoch;
  remembrance.last_root = root;
  if (!quiet) {
    return full(nullptr);
  }
  auto memo = std::make_unique<TreeMemo>();
  int verdict = full(memo.get());
  if (verdict == 1 && memo->complete && watch_epoch == epoch) {
    memo->epoch = epoch;
    memo->root = root;
    remembrance.memo = std::move(memo);
  }
  return verdict;
}

PyObject* module_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "ModuleCheck takes one positional argument");
    return nullptr;
  }
  auto* self = reinterpret_cast<ModuleCheck*>(callable);
  PyObject* module = args[0];
  int verdict = remembered_verdict(
      self->remembrance, module, [self, module](TreeMemo* memo) { return module_verdict(self, module, memo); });
  return verdict < 0 ? nullptr : answer(verdict == 1);
}

PyObject* module_check_remembered(PyObject* obj, void*) {
  return answer(reinterpret_cast<ModuleCheck*>(obj)->remembrance.memo != nullptr);
}

PyGetSetDef module_check_getset[] = {
    {"remembered",
     module_check_remembered,
     nullptr,
     "whether the next call re-checks only what no dict watcher sees (a tree remembered)",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

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
  new (&self->remembrance) Remembrance();
  self->vectorcall = module_check_call;
  self->type = reinterpret_cast<PyTypeObject*>(Py_NewRef(type));
  self->members = Py_NewRef(members);
  self->missing = Py_NewRef(missing);
  self->version = 0;  // the fast path is looked for on the first call
  self->fast = false;
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
  self->remembrance.memo.reset();
  watch_epoch++;  // a tree remembered by another check may point into these checks
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
  self->remembrance.~Remembrance();
  Py_TYPE(obj)->tp_free(obj);
}

// -- RootCheck -------------------------------------------------------------------------------

// Checks on values reached from one object the guard function holds fixed: the names in a
// module's globals dict (`g['torch'] is ref()`, `g['f'].__code__ is code`) or a class's
// attributes (`C.forward is ref()`). Called with no arguments. Remembered as a ModuleCheck's
// tree is: a globals dict is watched, a class's attributes hold while its version tag does.
struct RootCheck {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* root;
  PyObject* members;  // the tuple the checks below were read from (owns their objects)
  std::vector<MemberCheck> checks;
  Remembrance remembrance;
};

int root_verdict(RootCheck* self, TreeMemo* memo) {
  for (const MemberCheck& check : self->checks) {
    int verdict = check_root_member(self->root, check, memo);
    if (verdict != 1) {
      return verdict;
    }
  }
  return 1;
}

PyObject* root_check_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<RootCheck*>(callable);
  if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "RootCheck takes no arguments");
    return nullptr;
  }
  if (self->root == nullptr) {  // cleared
    return answer(false);
  }
  int verdict = remembered_verdict(self->remembrance, self->root, [self](TreeMemo* memo) { return root_verdict(self, memo); });
  return verdict < 0 ? nullptr : answer(verdict == 1);
}

PyObject* root_check_remembered(PyObject* obj, void*) {
  return answer(reinterpret_cast<RootCheck*>(obj)->remembrance.memo != nullptr);
}

PyGetSetDef root_check_getset[] = {
    {"remembered",
     root_check_remembered,
     nullptr,
     "whether the next call re-checks only what no dict watcher or class version sees",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

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
  new (&self->remembrance) Remembrance();
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
  self->remembrance.memo.reset();
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
  self->remembrance.~Remembrance();
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
  ModuleCheckType.tp_getset = module_check_getset;
  RootCheckType.tp_getset = root_check_getset;
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
#if PY_VERSION_HEX >= 0x030C0000
  dict_watcher = PyDict_AddWatcher(on_watched_dict_event);
  if (dict_watcher < 0) {  // every slot taken: trees are checked in full on every call
    PyErr_Clear();
  }
  function_watcher = PyFunction_AddWatcher(on_function_event);
  if (function_watcher < 0) {  // every slot taken: functions' code and defaults are read again
    PyErr_Clear();
  }
#endif
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) {
    return nullptr;
  }
  if (PyModule_AddObjectRef(module, "TensorCheck", reinterpret_cast<PyObject*>(&TensorCheckType)) < 0 ||
      PyModule_AddObjectRef(module, "ModuleCheck", reinterpret_cast<PyObject*>(&ModuleCheckType)) < 0 ||
      PyModule_AddObjectRef(module, "RootCheck", reinterpret_cast<PyObject*>(&RootCheckType)) < 0 ||
      PyModule_AddObjectRef(module, "REMEMBERS_TREES", dict_watcher >= 0 ? Py_True : Py_False) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
