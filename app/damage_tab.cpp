#include "damage_tab.hpp"

#include <algorithm>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>

#include "damage_analyses.hpp"
#include "job_controller.hpp"
#include "neighbour_graph_view.hpp"
#include "token_damage_view.hpp"

namespace embedlab::app {

namespace {

views::TokenDamageRun view_run(const QString& name, const DamageResult& r)
{
    views::TokenDamageRun v;
    v.name = name;
    v.kl_mean = r.kl_mean;
    for (const auto& b : r.buckets) {
        v.tokens << static_cast<double>(b.tokens);
        v.positions << static_cast<double>(b.positions);
        v.kl_as_target << b.kl_as_target;
        v.kl_as_input << b.kl_as_input;
        v.cosine << b.mean_cosine;
    }
    return v;
}

} // namespace

DamagePanel::DamagePanel(views::NeighbourGraphView* graph, JobController& jobs, RunsFn runs, QWidget* parent)
    : QWidget(parent), graph_(graph), jobs_(jobs), runs_fn_(std::move(runs)), first_(new QComboBox(this)),
      second_(new QComboBox(this)), colour_(new QComboBox(this)), status_(new QLabel(this)),
      view_(new views::TokenDamageView(this))
{
    first_->setToolTip("The compressed run (a Results row) measured against its original");
    second_->setToolTip("A second run drawn beside it in the plot (pca against lle at the same bytes)");
    colour_->addItems({"LLE reconstruction cosine", "damage: KL as target", "damage: 1 − cosine"});
    colour_->setToolTip("What colours the neighbour graph: the damage is the first run's, every token's");
    auto* compute_button = new QPushButton("Compute damage", this);
    compute_button->setToolTip(
        "KL per target token and rebuild cosine per row, on the run's evaluation text");
    status_->setWordWrap(true);
    auto* runs_row = new QHBoxLayout;
    runs_row->addWidget(new QLabel("run", this));
    runs_row->addWidget(first_, 1);
    runs_row->addWidget(new QLabel("beside", this));
    runs_row->addWidget(second_, 1);
    auto* colour_row = new QHBoxLayout;
    colour_row->addWidget(new QLabel("colour the graph by", this));
    colour_row->addWidget(colour_, 1);
    colour_row->addWidget(compute_button);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(runs_row);
    layout->addLayout(colour_row);
    layout->addWidget(status_);
    layout->addWidget(view_, 1);
    connect(compute_button, &QPushButton::clicked, this, &DamagePanel::compute);
    connect(colour_, &QComboBox::currentIndexChanged, this, &DamagePanel::applyColour);
    refreshRuns();
}

void DamagePanel::refreshRuns()
{
    const QString a = first_->currentText(), b = second_->currentText();
    runs_ = runs_fn_();
    first_->clear();
    second_->clear();
    second_->addItem("(none)");
    for (const auto& run : runs_) {
        first_->addItem(run.name);
        second_->addItem(run.name);
    }
    first_->setCurrentIndex(first_->findText(a) >= 0 ? first_->findText(a) : first_->count() - 1);
    second_->setCurrentIndex(std::max(second_->findText(b), 0));
    // The line says what to do next; once runs exist the old "no run yet" would be wrong.
    if (runs_.isEmpty())
        status_->setText("No compressed run yet: run one on the Results tab to see which tokens it damages.");
    else if (status_->text().startsWith("No compressed run"))
        status_->setText("Choose a run and press Compute damage.");
}

void DamagePanel::chooseRuns(int first, int second)
{
    first_->setCurrentIndex(first);
    second_->setCurrentIndex(second + 1);
}

int DamagePanel::compute()
{
    const int a = first_->currentIndex(), b = second_->currentIndex() - 1;
    if (a < 0 || a >= runs_.size()) {
        status_->setText("No compressed run chosen: run one on the Results tab first.");
        return -1;
    }
    QVector<Run> chosen{runs_[a]};
    if (b >= 0 && b < runs_.size() && b != a)
        chosen << runs_[b];
    status_->setText("Measuring " + chosen[0].name + (chosen.size() > 1 ? " and " + chosen[1].name : "") +
                     " against the original ...");
    QPointer<DamagePanel> self = this;
    return jobs_.submit("damage by token: " + chosen[0].name, [self, chosen](const ProgressFn& progress) {
        // Engine thread: each run's damage, then the per-token values of the first.
        views::TokenDamageData data;
        QVector<double> kl, one_minus_cos;
        for (int i = 0; i < chosen.size(); ++i) {
            const auto r = token_damage_of(chosen[i].request, [&](int64_t done, int64_t total) {
                return !progress || progress(i * total + done, chosen.size() * total);
            });
            data.runs << view_run(chosen[i].name, r);
            if (i == 0) {
                for (const auto& bucket : r.buckets)
                    data.buckets << QString::fromStdString(bucket.label);
                kl = QVector<double>(r.kl_as_target.begin(), r.kl_as_target.end());
                for (double c : r.cosine)
                    one_minus_cos << 1.0 - c;
            }
        }
        data.label = QString::fromStdString(chosen[0].request.model);
        const QString name = chosen[0].name;
        return std::function<void()>([self, data, kl, one_minus_cos, name] {
            if (!self)
                return;
            self->view_->setData(data);
            self->damaged_ = name;
            self->kl_ = kl;
            self->one_minus_cos_ = one_minus_cos;
            self->status_->setText(self->view_->summary());
            if (self->colour_->currentIndex() == LleCosine)
                self->colour_->setCurrentIndex(KlAsTarget); // what was asked for: the damage
            else
                self->applyColour();
        });
    });
}

void DamagePanel::setColourBy(ColourBy c)
{
    colour_->setCurrentIndex(c);
}

void DamagePanel::applyColour()
{
    const int c = colour_->currentIndex();
    if (c == LleCosine || damaged_.isEmpty()) {
        graph_->setTokenValues({}, {});
        if (c != LleCosine)
            status_->setText("Compute the damage first: the graph stays coloured by LLE cosine.");
        return;
    }
    // Short: the label sits beside the colour bar; the status names the run.
    graph_->setTokenValues(c == KlAsTarget ? kl_ : one_minus_cos_,
                           c == KlAsTarget ? "KL as target" : "1 − cosine");
    status_->setText(
        QString("The graph: every token coloured by %1 of %2.").arg(colour_->currentText(), damaged_));
}

QString DamagePanel::status() const
{
    return status_->text();
}

} // namespace embedlab::app
