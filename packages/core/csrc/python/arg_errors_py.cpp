// The TypeErrors of calls that no overload of a generated binding takes. pybind11 would list
// its C++ signatures ("incompatible function arguments ... 1. (input: ember._C.Tensor, ...");
// PyTorch's parser names what is wrong: a missing, surplus or unknown argument, or the
// signatures expected against the types given. Each generated function and Tensor method gets
// one late overload that runs only in pybind11's converting pass, after every real overload
// (and the sparse and number-first fallbacks appended before it) failed: it never slows down a
// call that succeeds. The parameters come from the table gen_ops.py writes (kBindingSpecs).
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "python/bind_support.h"

namespace ember {
namespace {

struct Param {
  char kind;  // 'p' positional, 'k' keyword-only, 'v' *size (any number of ints, or size=)
  std::string type, name, default_text;
  bool has_default;
};
using Params = std::vector<Param>;

Params parse_params(const std::string& text) {
  Params out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    std::vector<std::string> f;
    std::stringstream fs(item);
    std::string field;
    while (std::getline(fs, field, '|')) f.push_back(field);
    f.resize(4);
    bool has_default = !f[3].empty();
    out.push_back(
        {f[0].empty() ? 'p' : f[0][0], f[1], f[2], has_default ? f[3].substr(1) : "", has_default});
  }
  return out;
}

// PyTorch's spelling of a signature: (Tensor input, int dim, *, ember.dtype dtype = None).
std::string signature(const Params& params) {
  std::string s = "(";
  bool kw = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    if (i) s += ", ";
    if (p.kind == 'k' && !kw) {
      s += "*, ";
      kw = true;
    }
    s += p.type + " " + p.name;
    if (p.kind == 'v') kw = true;  // everything after *size is keyword-only
    if (p.has_default) s += " = " + p.default_text;
  }
  return s + ")";
}

// How PyTorch's parser names the type of a given argument: Tensor, int, numpy.float32, and
// "tuple of (int, str)" for a short sequence.
std::string type_label(py::handle o) {
  if (is_tensor_object(o.ptr())) return "Tensor";
  py::handle type = py::type::handle_of(o);
  std::string module = py::str(type.attr("__module__")), name = py::str(type.attr("__qualname__"));
  if (module.rfind("ember._C", 0) == 0) module = "ember" + module.substr(8);
  if (module != "builtins") name = module + "." + name;
  if ((PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) && py::len(o) <= 4 && py::len(o) > 0) {
    std::string items;
    for (py::handle item : py::reinterpret_borrow<py::sequence>(o))
      items += (items.empty() ? "" : ", ") + type_label(item);
    return name + " of (" + items + ")";
  }
  return name;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "\"" : ", \"") + n + "\"";
  return s;
}

// The arity fault of a call against one signature (a missing, surplus, duplicated or unknown
// argument), or "" when the count and names fit and so a type must be wrong.
std::string arity_fault(const std::string& fn, const Params& params, const py::tuple& pos,
                        const py::dict& kw) {
  size_t max_pos = 0, min_pos = 0;
  bool varargs = false;
  for (const Param& p : params) {
    if (p.kind == 'v') varargs = true;
    if (p.kind != 'p' || varargs) continue;
    ++max_pos;
    if (!p.has_default) min_pos = max_pos;
  }
  const size_t n = pos.size();
  if (!varargs && n > max_pos) {
    std::ostringstream m;
    m << fn << " takes ";
    if (min_pos == max_pos)
      m << max_pos;
    else
      m << "from " << min_pos << " to " << max_pos;
    m << " positional argument" << (max_pos == 1 && min_pos == max_pos ? "" : "s") << " but " << n
      << (n == 1 ? " was" : " were") << " given";
    return m.str();
  }
  for (auto item : kw) {
    std::string key = py::str(item.first);
    size_t index = 0;
    const Param* match = nullptr;
    for (const Param& p : params) {
      if (p.name == key) match = &p;
      if (!match && p.kind == 'p') ++index;
    }
    if (!match) return fn + " got an unexpected keyword argument '" + key + "'";
    bool filled = match->kind == 'v' ? n > 0 : (match->kind == 'p' && index < n);
    if (filled) return fn + " got multiple values for argument '" + key + "'";
  }
  std::vector<std::string> missing;
  size_t index = 0;
  for (const Param& p : params) {
    bool given = kw.contains(p.name.c_str());
    if (p.kind == 'v')
      given = given || n > index;
    else if (p.kind == 'p')
      given = given || index < n;
    if (p.kind == 'p') ++index;
    if (!given && !p.has_default) missing.push_back(p.name);
  }
  if (!missing.empty())
    return fn + " missing " + std::to_string(missing.size()) +
           " required positional arguments: " + quoted_list(missing);
  return "";
}

[[noreturn]] void raise_arg_error(const std::string& name, const std::vector<std::string>& texts,
                                  const py::tuple& pos, const py::dict& kw) {
  const std::string fn = name + "()";
  std::vector<Params> specs;  // parsed here, on the error path, to keep `import ember` fast
  for (const std::string& t : texts) specs.push_back(parse_params(t));
  if (specs.size() == 1 && specs[0].empty() && !pos.empty())  // as Python's own methods say it
    throw py::type_error(fn + " takes no arguments (" + std::to_string(pos.size()) + " given)");
  for (auto item : kw) {  // a keyword no signature has (x.sum(0, out=y): methods take no out=)
    std::string key = py::str(item.first);
    bool known = false;
    for (const Params& params : specs)
      for (const Param& p : params) known = known || p.name == key;
    if (!known) throw py::type_error(fn + " got an unexpected keyword argument '" + key + "'");
  }
  if (specs.size() == 1) {
    std::string fault = arity_fault(fn, specs[0], pos, kw);
    if (!fault.empty()) throw py::type_error(fault);
  }
  std::string got;
  for (py::handle a : pos) got += (got.empty() ? "" : ", ") + type_label(a);
  for (auto item : kw)
    got += (got.empty() ? "" : ", ") + std::string(py::str(item.first)) + "=" +
           type_label(item.second);
  std::string msg =
      fn + " received an invalid combination of arguments - got (" + got + "), but expected ";
  if (specs.size() == 1) {
    msg += signature(specs[0]);
  } else {
    msg += "one of:";
    for (const Params& p : specs) msg += "\n * " + signature(p);
  }
  throw py::type_error(msg);
}

// A unique default for the late overload's first parameter: a call with no positional argument
// gets it, which tells such a call from one whose first argument is None.
py::object& no_argument() {
  static py::object* sentinel = new py::object(py::module_::import("builtins").attr("object")());
  return *sentinel;  // leaked on purpose: it must outlive the interpreter's teardown order
}

// The function behind owner.name: under the __torch_function__ wrapper (ember.overrides), the
// bound function itself; a Python-level override keeps its own errors (appending to it below
// makes a new, unused function instead of chaining).
py::object unwrapped(py::object f) {
  while (!PyCFunction_Check(f.ptr()) && !PyInstanceMethod_Check(f.ptr()) &&
         py::hasattr(f, "__wrapped__"))
    f = f.attr("__wrapped__");
  if (PyInstanceMethod_Check(f.ptr()))
    f = py::reinterpret_borrow<py::object>(PyInstanceMethod_GET_FUNCTION(f.ptr()));
  return f;
}

// pybind11's spelling of a parameter type, in PyTorch's words: ember._C.Tensor -> Tensor,
// typing.SupportsInt | typing.SupportsIndex -> int, int | None -> int?.
std::string torch_type_name(std::string t) {
  bool optional = false;
  const std::string none = " | None";
  if (t.size() > none.size() && t.compare(t.size() - none.size(), none.size(), none) == 0) {
    t.resize(t.size() - none.size());
    optional = true;
  }
  if (t == "ember._C.Tensor")
    t = "Tensor";
  else if (t.find("SupportsInt") != std::string::npos)
    t = "int";
  else if (t.find("SupportsFloat") != std::string::npos)
    t = "float";
  else if (t == "dtype" || t == "ember._C.dtype")
    t = "ember.dtype";
  else if (t.rfind("collections.abc.Sequence[", 0) == 0 || t.rfind("list[", 0) == 0)
    t = t.find("int") != std::string::npos ? "tuple of ints" : "tuple";
  return optional ? t + "?" : t;
}

// The parameters of one signature line of a pybind11 docstring ("size(self: ember._C.Tensor,
// dim: int = 0) -> int") in kBindingSpecs' format; false for a line that is not one, or one
// with *args / **kwargs (nothing to name).
bool params_from_signature(const std::string& line, const std::string& name, bool method,
                           std::string* out) {
  if (line.rfind(name + "(", 0) != 0) return false;
  std::vector<std::string> items;
  int depth = 0;
  std::string item;
  size_t i = name.size() + 1;
  for (; i < line.size(); ++i) {
    char c = line[i];
    if (depth == 0 && (c == ',' || c == ')')) {
      size_t b = item.find_first_not_of(' ');
      if (b != std::string::npos) items.push_back(item.substr(b));
      item.clear();
      if (c == ')') break;
      continue;
    }
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    item += c;
  }
  if (i == line.size()) return false;
  std::string text;
  char kind = 'p';
  for (size_t k = 0; k < items.size(); ++k) {
    const std::string& it = items[k];
    if (it == "*") {
      kind = 'k';
      continue;
    }
    if (it == "/") continue;
    if (it[0] == '*') return false;
    size_t colon = it.find(": ");
    if (colon == std::string::npos) return false;
    std::string pname = it.substr(0, colon), type = it.substr(colon + 2), def;
    size_t eq = type.find(" = ");
    if (eq != std::string::npos) {
      def = "=" + type.substr(eq + 3);
      type.resize(eq);
    }
    if (method && k == 0 && pname == "self") continue;
    if (!text.empty()) text += ";";
    text += std::string(1, kind) + "|" + torch_type_name(type) + "|" + pname + "|" + def;
  }
  *out = text;
  return true;
}

// Every signature of a hand-written binding, read from pybind11's docstring (one line, or the
// numbered lines after "Overloaded function."); empty when the docstring has none.
std::vector<std::string> specs_from_docstring(const char* doc, const std::string& name,
                                              bool method) {
  std::vector<std::string> specs;
  if (!doc) return specs;
  std::stringstream ss(doc);
  std::string line, params;
  bool first = true;
  while (std::getline(ss, line)) {
    if (first && params_from_signature(line, name, method, &params)) return {params};
    first = false;
    size_t dot = line.find(". ");
    if (dot != std::string::npos && dot > 0 && line.find_first_not_of("0123456789") == dot &&
        params_from_signature(line.substr(dot + 2), name, method, &params))
      specs.push_back(params);
  }
  return specs;
}

void install_arg_errors(py::module_ module, py::object tensor_class) {
  std::map<std::pair<bool, std::string>, std::vector<std::string>> specs;
  for (size_t i = 0; i < kNumBindingSpecs; ++i) {
    const BindingSpec& s = kBindingSpecs[i];
    specs[{s.method, s.name}].push_back(s.params);
  }
  // A second overload turns on pybind11's no-conversion first pass, and a failed overload is
  // retried with conversion only if it has a positional parameter (besides self). The only
  // binding of a name without one (zeros(*size), x.view(*size), x.clone(*, memory_format)) would
  // then fail for good on anything needing a conversion (a default None for a Generator*): those
  // keep their single overload (and sizes_from_args' own messages). One with no parameter at all
  // (x.exp()) has nothing to convert, nor one whose keyword-only ints and bools take Python's
  // ints and bools as they are (x.round(*, decimals), x.aminmax(*, dim, keepdim); PyTorch too
  // refuses a NumPy bool for keepdim).
  auto only_plain_keywords = [](const std::string& params) {
    std::stringstream ss(params);
    std::string item;
    while (std::getline(ss, item, ';'))
      if (item.rfind("k|int|", 0) != 0 && item.rfind("k|bool|", 0) != 0) return false;
    return true;
  };
  auto drop_unsafe = [&specs, &only_plain_keywords] {
    for (auto it = specs.begin(); it != specs.end();) {
      const std::string& params = it->second[0];
      bool safe = params.empty() || (";" + params).find(";p|") != std::string::npos ||
                  only_plain_keywords(params);
      it = (it->second.size() == 1 && !safe) ? specs.erase(it) : std::next(it);
    }
  };
  drop_unsafe();
  // The hand-written bindings (x.item(), x.size(dim), ember.can_cast, ...), and those that
  // replace a generated one (x.round(decimals)): their pybind11 docstrings give the parameters.
  for (bool method : {false, true}) {
    py::object owner = method ? tensor_class : py::object(module);
    py::dict members(owner.attr("__dict__"));  // a class's is a mappingproxy: copied
    for (auto item : members) {
      std::string name = py::str(item.first);
      if (name.empty() || name[0] == '_' || specs.count({method, name})) continue;
      py::object f = unwrapped(py::reinterpret_borrow<py::object>(item.second));
      if (!PyCFunction_Check(f.ptr())) continue;
      auto found = specs_from_docstring(reinterpret_cast<PyCFunctionObject*>(f.ptr())->m_ml->ml_doc,
                                        name, method);
      if (!found.empty()) specs[{method, name}] = std::move(found);
    }
  }
  drop_unsafe();
  for (auto& [key, params] : specs) {
    const auto& [method, name] = key;
    py::object owner = method ? tensor_class : py::object(module);
    py::object existing = unwrapped(py::getattr(owner, name.c_str(), py::none()));
    if (!PyCFunction_Check(existing.ptr())) continue;
    auto report = [name = name, params = std::move(params)](py::object first, py::args rest,
                                                            py::kwargs kw) -> py::object {
      py::tuple pos =
          first.is(no_argument()) ? py::tuple() : py::tuple(py::make_tuple(first) + rest);
      raise_arg_error(name, params, pos, kw);
    };
    // pybind11 rewrites the chain's docstring on every overload appended; the old one comes
    // back (help(ember.add) and the doctests show only the real overloads). pybind11 owns the
    // text through malloc (strdup), as here.
    auto* def = reinterpret_cast<PyCFunctionObject*>(existing.ptr())->m_ml;
    const char* old_doc = def->ml_doc ? strdup(def->ml_doc) : nullptr;
    if (method) {
      py::cpp_function([report](py::object /*self*/, LateOperand first, py::args rest,
                                py::kwargs kw) { return report(first.value, rest, kw); },
                       py::name(name.c_str()), py::is_method(owner), py::sibling(existing),
                       py::arg("__ember_first") = no_argument());
    } else {
      py::cpp_function([report](LateOperand first, py::args rest,
                                py::kwargs kw) { return report(first.value, rest, kw); },
                       py::name(name.c_str()), py::scope(owner), py::sibling(existing),
                       py::arg("__ember_first") = no_argument());
    }
    std::free(const_cast<char*>(def->ml_doc));
    def->ml_doc = old_doc;
  }
}

}  // namespace

void bind_arg_errors(py::module_& m) {
  m.def("_install_arg_errors", &install_arg_errors, py::arg("module"), py::arg("tensor_class"),
        "Gives every generated function of module and method of tensor_class a last overload "
        "raising PyTorch's TypeError for a call none of its overloads takes. Run once, after "
        "every other late overload is appended (ember/__init__.py).");
}

}  // namespace ember
