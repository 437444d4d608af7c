// The method panel's pages generated from the registry (issue 59 item 3): every
// built-in method with its fields' widgets and the engine's ranges, a method
// registered at run time, and the tests' toy method (toy_method.hpp) with a field of
// its own run from the window to a Results row (its own program: the registrations
// must not leak into the other GUI tests).
#include "checked_spin_box.hpp"
#include "gui_test_support.hpp"
#include "method_panel.hpp"
#include "results_view.hpp"
#include "toy_method.hpp"
#include "workbench_support.hpp"

#include "embedlab/experiment_request.hpp"
#include "embedlab/method_registry.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardItemModel>
#include <QStatusBar>
#include <algorithm>
#include <gtest/gtest.h>

namespace {

int64_t shape_product(const std::vector<int64_t>& shape)
{
    int64_t p = 1;
    for (int64_t v : shape)
        p *= v;
    return p;
}

using embedlab::app::CheckedSpinBox;
using embedlab::app::MethodPanel;

// A widget of `field` on the page of `method` (each page's widgets are named by field).
template <class W> W* field_widget(MethodPanel& panel, const QString& method, const char* field)
{
    panel.setMethod(method);
    auto* stack = panel.findChild<QStackedWidget*>();
    return stack ? stack->currentWidget()->findChild<W*>(field) : nullptr;
}

// Every built-in method is offered with its registry summary, a store choice where the
// method takes `store` (the ggml types whose blocks do not divide d disabled), the
// engine's ranges (lle's k 1..d, not 1..64), and first values the engine runs.
TEST(MethodPanelPages, OffersEveryBuiltInMethodWithTheEnginesRanges)
{
    MethodPanel panel;
    panel.setDimension(128);
    const QStringList builtin{"pca",     "svd",     "tt",    "tucker", "lle", "lle-unk",
                              "lle-pca", "fourier", "quant", "aq",     "flat"};
    auto* methods = panel.findChild<QComboBox*>();
    ASSERT_NE(methods, nullptr);
    for (const QString& m : builtin) {
        SCOPED_TRACE(m.toStdString());
        EXPECT_TRUE(MethodPanel::methods().contains(m));
        const int i = methods->findText(m);
        ASSERT_GE(i, 0);
        const auto& row = embedlab::method_descriptor(m.toStdString());
        EXPECT_EQ(methods->itemData(i, Qt::ToolTipRole).toString(), QString::fromLatin1(row.summary));
        const bool stores = std::find(row.fields.begin(), row.fields.end(), "store") != row.fields.end();
        auto* store = field_widget<QComboBox>(panel, m, "store");
        EXPECT_EQ(store != nullptr, stores);
        if (store) {
            EXPECT_EQ(store->currentText(), "f32") << "the default: f32";
            const int q8 = store->findText("q8_0"), q4k = store->findText("q4_k");
            ASSERT_GE(q8, 0);
            ASSERT_GE(q4k, 0);
            store->setCurrentIndex(q8);
            EXPECT_EQ(panel.request().store, "q8_0");
            const auto* items = qobject_cast<QStandardItemModel*>(store->model());
            EXPECT_FALSE(items->item(q4k)->isEnabled()) << "q4_k's blocks of 256 do not divide 128";
            store->setCurrentIndex(0);
            EXPECT_EQ(panel.request().store, "");
        }
        // Every field of the method has its widget, named by the field.
        for (const auto& f : row.fields) {
            if (f == "freq_text" || f == "calib_text")
                continue; // the shared text rows
            EXPECT_NE(field_widget<QWidget>(panel, m, f.c_str()), nullptr) << f;
        }
        // The first values are a request the engine runs on d = 128.
        EXPECT_NO_THROW(embedlab::check_request(panel.request(m), 128));
    }
    for (const char* lle : {"lle", "lle-unk", "lle-pca"}) {
        auto* k = field_widget<QSpinBox>(panel, lle, "k");
        ASSERT_NE(k, nullptr) << lle;
        EXPECT_EQ(k->maximum(), 128) << lle << ": k is 1..d";
        panel.setDimension(300);
        EXPECT_EQ(k->maximum(), 300) << lle;
        panel.setDimension(128);
    }
    EXPECT_EQ(field_widget<QSpinBox>(panel, "lle", "k")->minimum(), 1);
    EXPECT_EQ(field_widget<QSpinBox>(panel, "lle-unk", "k")->minimum(), 0) << "0: the mean of V_C";
    EXPECT_EQ(field_widget<QSpinBox>(panel, "lle-unk", "k")->specialValueText(), "k = the mean of V_C");
    // tucker's shape (the example's 8,8,12 of 768) was fitted to d = 128.
    EXPECT_EQ(shape_product(panel.request("tucker").shape), 128);
    // A field with applies_with: fourier's hidden ratio only with mlp geglu.
    auto* hidden = field_widget<QDoubleSpinBox>(panel, "fourier", "hidden_ratio");
    auto* mlp = field_widget<QComboBox>(panel, "fourier", "mlp");
    ASSERT_TRUE(hidden && mlp);
    mlp->setCurrentText("linear");
    EXPECT_FALSE(hidden->isEnabled());
    hidden->setValue(0.5);
    EXPECT_EQ(panel.request().hidden_ratio, embedlab::CompressionRequest{}.hidden_ratio);
    mlp->setCurrentText("geglu");
    EXPECT_TRUE(hidden->isEnabled());
    EXPECT_DOUBLE_EQ(panel.request().hidden_ratio, 0.5);
    EXPECT_NO_THROW(embedlab::check_request(panel.request(), 128));
    hidden->setValue(0.25);
    mlp->setCurrentText("linear");
    panel.setMethod("pca");
}

// A method registered at run time appears in a panel made after: its field's box has
// the doc's range; an out-of-range number typed as a user does is refused in place
// and Run queues nothing; a valid one is the request's field.
TEST(MethodPanelPages, OffersAMethodRegisteredAtRunTime)
{
    embedlab::FieldDoc rank = embedlab::default_field_doc("rank");
    rank.label = "Projection rank";
    embedlab::register_method(
        {.name = "toyproj",
         .part = embedlab::CompressedPart::TokenEmbedding,
         .summary = "a random projection (the panel test's toy)",
         .stored_as = "lrf",
         .fields = {"rank"},
         .check =
             [](const embedlab::CompressionRequest& r, int64_t d, const embedlab::RequestFail& fail) {
                 if (r.rank < 1 || (d > 0 && r.rank > d))
                     fail("rank", std::to_string(r.rank) + " is outside 1..d");
             },
         .describe =
             [](const embedlab::CompressionRequest& r) { return "toyproj rank " + std::to_string(r.rank); },
         .field_docs = {{"rank", rank}},
         .example = R"({"rank": 6})"});
    MethodPanel panel;
    panel.setDimension(64);
    panel.setAttribute(Qt::WA_DontShowOnScreen);
    panel.show();
    panel.activateWindow();
    ASSERT_TRUE(MethodPanel::methods().contains("toyproj"));
    auto* box = field_widget<QSpinBox>(panel, "toyproj", "rank");
    ASSERT_NE(box, nullptr);
    EXPECT_EQ(panel.method(), "toyproj");
    EXPECT_EQ(box->value(), 6) << "the example's value";
    EXPECT_EQ(box->maximum(), 64) << "hi_is_width: the model's width";
    EXPECT_TRUE(box->toolTip().contains("1..64")) << box->toolTip().toStdString();
    EXPECT_TRUE(box->prefix().startsWith("Projection rank")) << "the doc's label";
    bool ran = false;
    QObject::connect(&panel, &MethodPanel::runRequested, [&] { ran = true; });
    QPushButton* run = panel.findChild<QPushButton*>("run");
    ASSERT_NE(run, nullptr);
    embedlab::test::type_number(box, "500");
    embedlab::test::press_key(box, Qt::Key_Return);
    EXPECT_TRUE(panel.problem().contains("500 is outside 1..64")) << panel.problem().toStdString();
    bool said = false;
    for (auto* label : panel.findChildren<QLabel*>())
        said = said || (label->isVisible() && label->text().startsWith("Not run while") &&
                        label->text().contains("500"));
    EXPECT_TRUE(said) << "the refusal is shown in the panel";
    run->click();
    EXPECT_FALSE(ran) << "rank 500 of d = 64 must not run";
    embedlab::test::type_number(box, "12");
    embedlab::test::press_key(box, Qt::Key_Return);
    EXPECT_EQ(panel.problem(), "");
    run->click();
    EXPECT_TRUE(ran);
    const auto r = panel.request();
    EXPECT_EQ(r.method, "toyproj");
    EXPECT_EQ(r.rank, 12);
    EXPECT_NO_THROW(embedlab::check_request(r, 64));
    // Shown back from a request, as a session or the settings do.
    auto again = r;
    again.rank = 20;
    panel.setRequest(again);
    EXPECT_EQ(box->value(), 20);
}

// The toy's own field (density, in (0, 1]) is a box on its page with the field's
// label; a value outside is refused in place and Run queues nothing; a valid one runs
// the toy from the window to a Results row.
TEST(MethodPanelPages, RunsTheToysOwnFieldToAResultsRow)
{
    toy_method::register_toy_once();
    embedlab::app::MainWindow window;
    window.setAskBeforeDiscarding(false);
    embedlab::test::open_bundled(window); // gpt2's shape at d = 128, V = 50257
    MethodPanel& panel = *window.methodPanel();
    ASSERT_TRUE(MethodPanel::methods().contains("randproj"));
    auto* density = field_widget<QDoubleSpinBox>(panel, "randproj", "density");
    ASSERT_NE(density, nullptr) << "the toy's own field has its box";
    EXPECT_EQ(panel.method(), "randproj");
    EXPECT_DOUBLE_EQ(density->value(), 1.0) << "the field's default";
    EXPECT_TRUE(density->prefix().startsWith("Density")) << "the field's label";
    EXPECT_TRUE(
        density->toolTip().contains("share of R's entries drawn nonzero (a sparse projection): (0, 1]"))
        << density->toolTip().toStdString();
    auto* run = panel.findChild<QPushButton*>("run");
    ASSERT_NE(run, nullptr);
    embedlab::test::type_number(density, "1.5");
    embedlab::test::press_key(density, Qt::Key_Return);
    EXPECT_TRUE(panel.problem().contains("1.5 is outside")) << panel.problem().toStdString();
    run->click();
    EXPECT_TRUE(window.statusBar()->currentMessage().startsWith("Not run: "))
        << window.statusBar()->currentMessage().toStdString();
    EXPECT_TRUE(window.jobs().idle()) << "density 1.5 must not run";

    embedlab::test::type_number(density, "0.5");
    embedlab::test::press_key(density, Qt::Key_Return);
    EXPECT_EQ(panel.problem(), "");
    const auto request = panel.request();
    EXPECT_EQ(request.method_fields.at("density"), 0.5);
    const double r = double(request.rank); // the workbench's first rank
    ASSERT_GT(r, 0);
    run->click();
    ASSERT_TRUE(embedlab::test::wait_for([&] { return window.jobs().idle(); }));
    const auto& rows = window.resultsView()->rows();
    ASSERT_EQ(rows.size(), 1u) << window.statusBar()->currentMessage().toStdString();
    const double V = 50257, d = 128;
    EXPECT_EQ(rows[0].method, "randproj");
    EXPECT_EQ(rows[0].parameters, "rank " + std::to_string(request.rank));
    EXPECT_DOUBLE_EQ(double(rows[0].params_after), V * r + r * d);
    EXPECT_TRUE(std::isfinite(rows[0].ppl) && rows[0].ppl > 1);
    // Shown back from a request: the box holds the field's value.
    auto again = request;
    again.method_fields["density"] = 0.25;
    panel.setRequest(again);
    EXPECT_DOUBLE_EQ(density->value(), 0.25);
}

} // namespace

int main(int argc, char** argv)
{
    return embedlab::test::run_gui_tests(argc, argv, "test_method_panel");
}
