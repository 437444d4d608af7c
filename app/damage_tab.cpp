#include "damage_tab.hpp"

#include <algorithm>

#include <QComboBox>
#include <QFileInfo>
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

// A box as narrow as the side page needs (the map has most of the width): its text cut
// at the box's edge, the list whole, and the chosen item's whole text in its tooltip.
void let_shrink(QComboBox* box, const QString& about)
{
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(8);
    const auto describe = [box, about] {
        box->setToolTip(box->currentText().isEmpty() ? about : box->currentText() + "\n" + about);
    };
    QObject::connect(box, &QComboBox::currentTextChanged, box, describe);
    describe();
}

} // namespace

DamagePanel::DamagePanel(views::NeighbourGraphView* graph, JobController& jobs, RunsFn runs, QWidget* parent)
    : QWidget(parent), graph_(graph), jobs_(jobs), runs_fn_(std::move(runs)), first_(new QComboBox(this)),
      second_(new QComboBox(this)), colour_(new QComboBox(this)), status_(new QLabel(this)),
      view_(new views::TokenDamageView(this))
{
    let_shrink(first_, "The compressed run (a Results row) measured against its original");
    let_shrink(second_, "A second run drawn beside it in the plot (pca against lle at the same bytes)");
    colour_->addItems({"LLE reconstruction cosine", "damage: KL as target", "damage: 1 − cosine"});
    let_shrink(colour_, "What colours the neighbour graph: the damage is the first run's, every token's");
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
    for (QComboBox* box : {first_, second_})
        connect(box, &QComboBox::currentIndexChanged, this, &DamagePanel::dropStale);
    refreshRuns();
}

void DamagePanel::setModel(const QString& model)
{
    model_ = model;
    view_->setData({});
    damaged_.clear();
    measured_.clear();
    kl_.clear();
    one_minus_cos_.clear();
    {
        const QSignalBlocker block(colour_); // the graph is reset with the model
        colour_->setCurrentIndex(LleCosine);
    }
    graph_->setTokenValues({}, {});
    status_->clear();
    first_->setCurrentIndex(-1); // the new model's latest run is chosen below
    second_->setCurrentIndex(0); // none beside
    refreshRuns();
}

void DamagePanel::refreshRuns()
{
    const QString a = first_->currentText(), b = second_->currentText();
    runs_ = runs_fn_();
    {
        const QSignalBlocker block_first(first_), block_second(second_); // one check below
        first_->clear();
        second_->clear();
        second_->addItem("(none)");
        // The loaded model's latest run, or none (another model's numbers are not its).
        int latest = model_.isEmpty() ? static_cast<int>(runs_.size()) - 1 : -1, kept = -1;
        for (int i = 0; i < runs_.size(); ++i) {
            first_->addItem(runs_[i].name);
            second_->addItem(runs_[i].name);
            if (runs_[i].model == model_)
                latest = i;
            if (runs_[i].name == a)
                kept = i; // chosen by hand, another model's too (setModel forgets it)
        }
        first_->setCurrentIndex(kept >= 0 ? kept : latest);
        second_->setCurrentIndex(std::max(second_->findText(b), 0));
    }
    dropStale();
    // The line says what to do next; once runs exist the old "no run yet" would be wrong.
    if (runs_.isEmpty())
        status_->setText("No compressed run yet: run one on the Results tab to see which tokens it damages.");
    else if (first_->currentIndex() < 0)
        status_->setText("No run of " + QFileInfo(model_).fileName() +
                         " yet: run one on the Results tab, or choose another model's run.");
    else if (status_->text().startsWith("No compressed run") || status_->text().startsWith("No run of") ||
             status_->text().isEmpty())
        status_->setText("Choose a run and press Compute damage.");
}

QStringList DamagePanel::chosenNames() const
{
    QStringList names{first_->currentText()};
    if (second_->currentIndex() > 0 && second_->currentText() != names[0])
        names << second_->currentText();
    return names;
}

void DamagePanel::dropStale()
{
    // Issue 61 item 3: the plot and the graph's colours never stand under another run's name.
    if (measured_.isEmpty() || measured_ == chosenNames())
        return;
    const QString was = measured_.join(" and ");
    view_->setData({});
    damaged_.clear();
    measured_.clear();
    kl_.clear();
    one_minus_cos_.clear();
    graph_->setTokenValues({}, {});
    status_->setText("The damage shown was for " + was + ": press Compute damage for " +
                     chosenNames().join(" and ") + ".");
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
        QStringList names;
        for (const auto& run : chosen)
            names << run.name;
        return std::function<void()>([self, data, kl, one_minus_cos, name, names] {
            if (!self)
                return;
            if (self->chosenNames() != names) { // chosen others while it measured
                self->status_->setText("Not shown: the damage was measured for " + names.join(" and ") +
                                       ": press Compute damage for the runs chosen now.");
                return;
            }
            self->view_->setData(data);
            self->damaged_ = name;
            self->measured_ = names;
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
