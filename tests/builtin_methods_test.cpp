// Issue 59: a built-in method is its own files. Each family registers its registry rows,
// stored forms, TableMethods and rebuilds itself (EMBEDLAB_BUILTIN_ROWS/_TABLES), and
// builtin_methods.hpp's one list names the families: the registry, the forms, the table
// methods and the rebuilds hold exactly what the families registered, in their order.
// TensorSLM's energy model is each method's own (TableMethod::recorded_energy).
#include <gtest/gtest.h>

#include <set>

#include "embedlab/accounting.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/table_method.hpp"
#include "methods/request_support.hpp"
#include "methods/table_method_support.hpp"
#include "test_support.hpp"

namespace {

std::vector<std::string> registered_family_names()
{
    std::vector<std::string> names;
    for (const auto& family : embedlab::method_rows::builtin_rows())
        names.push_back(family.family);
    return names;
}

const embedlab::method_rows::BuiltinRows& rows_of_family(const std::string& family)
{
    for (const auto& rows : embedlab::method_rows::builtin_rows())
        if (rows.family == family)
            return rows;
    throw std::logic_error("no family " + family);
}

// The recorded accounting block a fit of `method` writes into embedlab.json.
nlohmann::json recorded_accounting(const std::string& method, int64_t rank)
{
    const auto a = embedlab::account_without_table({.method = method, .rank = rank}, 1000, 64, 0, "test");
    return nlohmann::json::parse(embedlab::accounting_json(a).dump());
}

} // namespace

TEST(MethodRegistry, BuiltInRowsAndFormsAreWhatTheFamiliesRegistered)
{
    EXPECT_EQ(registered_family_names(),
              (std::vector<std::string>{"low_rank", "tensor_train", "tucker", "partial_sparse", "fourier",
                                        "quant", "aq", "flat"}));
    std::vector<std::string> family_methods, family_forms;
    for (const auto& family : embedlab::method_rows::builtin_rows()) {
        for (const auto& m : family.methods)
            family_methods.push_back(m.name);
        for (const auto& f : family.forms)
            family_forms.push_back(f.name);
    }
    // The order help lists them in, unchanged by registering from the families' files.
    EXPECT_EQ(family_methods, (std::vector<std::string>{"pca", "svd", "tt", "tucker", "lle", "lle-unk",
                                                        "lle-pca", "fourier", "quant", "aq", "flat"}));
    EXPECT_EQ(family_forms, (std::vector<std::string>{"pca", "svd", "lrf", "tt", "tucker", "lle", "lle-unk",
                                                      "lle-pca", "fourier", "quant", "aq"}));
    const auto& registry = embedlab::method_registry();
    ASSERT_GE(registry.size(), family_methods.size());
    for (size_t i = 0; i < family_methods.size(); ++i)
        EXPECT_EQ(registry[i].name, family_methods[i]) << i;
    const auto& forms = embedlab::stored_forms();
    ASSERT_GE(forms.size(), family_forms.size());
    for (size_t i = 0; i < family_forms.size(); ++i)
        EXPECT_EQ(forms[i].name, family_forms[i]) << i;
}

// A family's table half registers a TableMethod for each of its token-table rows and a
// rebuild for each of its forms: nothing of a method is listed outside its files.
TEST(MethodRegistry, EachFamilysTableHalfImplementsItsOwnRowsAndForms)
{
    std::vector<std::string> all_tables;
    std::set<std::string> families_with_tables;
    for (const auto& tables : embedlab::table_support::builtin_tables()) {
        families_with_tables.insert(tables.family);
        const auto& rows = rows_of_family(tables.family);
        std::vector<std::string> table_rows, implemented, forms, rebuilt;
        for (const auto& m : rows.methods)
            if (m.part == embedlab::CompressedPart::TokenEmbedding)
                table_rows.push_back(m.name);
        for (const auto* t : tables.methods)
            implemented.push_back(t->name());
        for (const auto& f : rows.forms)
            forms.push_back(f.name);
        for (const auto& r : tables.rebuilds)
            rebuilt.push_back(r.form);
        EXPECT_EQ(implemented, table_rows) << tables.family;
        EXPECT_EQ(std::set<std::string>(rebuilt.begin(), rebuilt.end()),
                  std::set<std::string>(forms.begin(), forms.end()))
            << tables.family;
        all_tables.insert(all_tables.end(), implemented.begin(), implemented.end());
    }
    // flat alone has rows and no table half (it compresses the attention values).
    for (const auto& family : registered_family_names())
        EXPECT_EQ(families_with_tables.count(family), family == "flat" ? 0u : 1u) << family;
    const auto& listed = embedlab::table_methods();
    ASSERT_GE(listed.size(), all_tables.size());
    for (size_t i = 0; i < all_tables.size(); ++i)
        EXPECT_EQ(listed[i]->name(), all_tables[i]) << i;
}

// measure's energy_model reads each method's own closed form: pca, svd and tt give
// TensorSLM's eqs. 2-5 as their accounting computes them; the others have none.
TEST(MethodRegistry, TheEnergyModelIsEachMethodsOwn)
{
    const embedlab::EnergyOptions o{.nu = 3.0, .tau = 0.5, .tokens = 40};
    auto same = [](const embedlab::EnergyEstimate& a, const embedlab::EnergyEstimate& b) {
        return a.original_nu == b.original_nu && a.original_tau == b.original_tau &&
               a.compressed_nu == b.compressed_nu && a.compressed_tau == b.compressed_tau &&
               a.omega == b.omega;
    };
    for (const auto& [method, kind] :
         {std::pair{"pca", embedlab::LowRankKind::PCA}, std::pair{"svd", embedlab::LowRankKind::SVD}}) {
        const auto e =
            embedlab::table_method(method).recorded_energy(recorded_accounting(method, 12), 1000, 64, o);
        ASSERT_TRUE(e) << method;
        EXPECT_TRUE(same(*e, embedlab::account_low_rank(kind, 1000, 64, 12, o).energy)) << method;
        EXPECT_GT(e->compressed_nu, 0) << method;
    }
    const nlohmann::json tt_record = {{"method", "tt"}, {"shape", {4, 4, 4}}, {"ranks", {1, 3, 3, 1}}};
    const auto& tt = embedlab::table_method("tt");
    const auto uniform = tt.recorded_energy(tt_record, 1000, 64, o);
    ASSERT_TRUE(uniform);
    EXPECT_TRUE(same(*uniform, embedlab::account_tensor_train(1000, {4, 4, 4}, {1, 3, 3, 1}, o).energy));
    auto per_token = tt_record;
    per_token["rank_mode"] = "per_token";
    per_token["energy_size"] = 20.5;
    const auto mean = tt.recorded_energy(per_token, 1000, 64, o);
    ASSERT_TRUE(mean);
    EXPECT_TRUE(same(*mean, embedlab::tt_energy(1000, 64, 20.5, o)));
    per_token.erase("energy_size");
    EXPECT_EQ(embedlab::test::input_error_of([&] { tt.recorded_energy(per_token, 1000, 64, o); },
                                             "per-token ranks without energy_size"),
              "embedlab.json: accounting.energy_size must be a positive number for per-token TT ranks");
    for (const char* none : {"tucker", "lle", "fourier", "quant", "aq"})
        EXPECT_FALSE(embedlab::table_method(none).recorded_energy({{"method", none}}, 1000, 64, o)) << none;
}
