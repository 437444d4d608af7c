// The table methods (table_method.hpp): one line per method, in the registry's order.
#include "methods/table_method_support.hpp"

namespace embedlab {

const std::vector<const TableMethod*>& table_methods()
{
    using namespace table_support;
    static const std::vector<const TableMethod*> methods{
        &pca_method(), &svd_method(),     &tensor_train_method(), &tucker_method(),
        &lle_method(), &lle_unk_method(), &lle_pca_method(),      &fourier_method(),
    };
    return methods;
}

const TableMethod& table_method(const std::string& name)
{
    const MethodDescriptor& m = method_descriptor(name);
    for (const TableMethod* t : table_methods())
        if (t->id() == m.id)
            return *t;
    throw InputError("method '" + name + "' compresses " +
                     (m.part == CompressedPart::AttentionValues ? "the attention values" : "another part") +
                     ", not the token embedding");
}

} // namespace embedlab
