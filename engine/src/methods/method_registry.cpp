// The method registry (method_registry.hpp). Torch-free: the job checker and its
// fuzzer read it. Each built-in row is its family's (request_<family>.cpp), gathered
// through builtin_methods.hpp's one list.
#include "embedlab/method_registry.hpp"
#include "methods/request_support.hpp"

#include <algorithm>
#include <stdexcept>

#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"

namespace embedlab {

namespace {

// The built-in rows, each family's as it registered them (builtin_methods.hpp), then
// those registered at run time.
std::deque<MethodDescriptor>& registry()
{
    static std::deque<MethodDescriptor> methods = [] {
        std::deque<MethodDescriptor> all;
        for (const auto& family : method_rows::builtin_rows())
            all.insert(all.end(), family.methods.begin(), family.methods.end());
        return all;
    }();
    return methods;
}

// An own field is a name no field has yet, of a type the front ends read, whose
// default its own range holds.
void check_own_field(const std::string& method, const MethodField& f)
{
    const std::string what = "register_method: method '" + method + "'s field \"" + f.name + "\" ";
    const bool plain = !f.name.empty() && std::all_of(f.name.begin(), f.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!plain)
        throw InputError(what + "must be lower case letters, digits and '_'");
    const auto& known = request_fields();
    if (std::find(known.begin(), known.end(), f.name) != known.end())
        throw InputError(what + "is taken (a request field already)");
    const bool typed = (f.type == RequestFieldType::Integer && f.default_value.is_number_integer()) ||
                       (f.type == RequestFieldType::Number && f.default_value.is_number()) ||
                       (f.type == RequestFieldType::String && f.default_value.is_string());
    if (!typed)
        throw InputError(what + "must be an Integer, Number or String field with a default of its type");
    if (!field_value_allowed(f.doc, f.default_value, 0))
        throw InputError(what + "has a default " + f.default_value.dump() + " outside " +
                         field_range_text(f.doc));
}

} // namespace

const std::deque<MethodDescriptor>& method_registry()
{
    return registry();
}

const MethodDescriptor& register_method(MethodDescriptor method)
{
    const std::string name = method.name ? method.name : "";
    if (name.empty() || find_method(name))
        throw InputError("register_method: the name '" + name + "' is " + (name.empty() ? "empty" : "taken"));
    if (!method.check || !method.describe)
        throw InputError("register_method: method '" + name + "' needs a check and a describe function");
    for (const auto& field : method.fields)
        if (std::find(request_fields().begin(), request_fields().end(), field) == request_fields().end())
            throw InputError("register_method: method '" + name + "' takes \"" + field +
                             "\", which is not a request field (" + joined(request_fields(), ", ") + ")");
    for (size_t i = 0; i < method.own_fields.size(); ++i) {
        check_own_field(name, method.own_fields[i]);
        for (size_t j = 0; j < i; ++j)
            if (method.own_fields[j].name == method.own_fields[i].name)
                throw InputError("register_method: method '" + name + "' declares \"" +
                                 method.own_fields[i].name + "\" twice");
    }
    for (const auto& own : method.own_fields)
        method.fields.push_back(own.name);
    method.id = Method::External;
    return registry().emplace_back(std::move(method));
}

const MethodField* find_method_field(const std::string& name)
{
    for (const auto& m : method_registry())
        for (const auto& f : m.own_fields)
            if (f.name == name)
                return &f;
    return nullptr;
}

std::string method_names(const char* separator)
{
    std::string s;
    for (const auto& m : method_registry())
        s += (s.empty() ? "" : separator) + std::string(m.name);
    return s;
}

const MethodDescriptor* find_method(const std::string& name)
{
    return row_with_name(method_registry(), name);
}

const MethodDescriptor& method_descriptor(const std::string& name)
{
    if (const auto* m = find_method(name))
        return *m;
    throw InputError("unknown method '" + name + "' (" + method_names() + ")");
}

const MethodDescriptor& method_descriptor(Method id)
{
    if (id == Method::External)
        throw std::logic_error("method_descriptor: a registered method is known by its name");
    for (const auto& m : method_registry())
        if (m.id == id)
            return m;
    throw std::logic_error("method_descriptor: a Method without a registry row");
}

namespace method_rows {

const std::vector<BuiltinRows>& builtin_rows()
{
#define EMBEDLAB_ROWS_OF(family) family##_rows(),
    static const std::vector<BuiltinRows> all{
        EMBEDLAB_BUILTIN_METHOD_FAMILIES(EMBEDLAB_ROWS_OF, EMBEDLAB_ROWS_OF)};
#undef EMBEDLAB_ROWS_OF
    return all;
}

std::vector<std::vector<int64_t>> sweep_shapes(const SweepValues& values, const std::string& method,
                                               int64_t d)
{
    std::vector<std::vector<int64_t>> shapes;
    if (auto one = values.integers("--shape", 1, d); !one.empty())
        shapes.push_back(std::move(one));
    for (auto& shape : values.integer_sets("--shapes", 1, d))
        shapes.push_back(std::move(shape));
    if (shapes.empty())
        throw InputError("sweep: --method " + method +
                         " needs --shape I1,I2,.. or --shapes A:B:.. (product d = " + width(d) + ")");
    return shapes;
}

} // namespace method_rows

} // namespace embedlab
