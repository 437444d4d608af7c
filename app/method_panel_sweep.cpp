// The method panel's sweeps (method_panel.hpp, issue 41 item 11): the swept boxes,
// the requests Run queues, the count on the Run button and the question before a
// large sweep.
#include "checked_spin_box.hpp"
#include "method_panel.hpp"

#include <QMessageBox>
#include <QPushButton>
#include <algorithm>
#include <map>

namespace embedlab::app {

namespace {

// A sweepable box's sweep (its values; empty: one number, or a sweep with a problem).
QList<double> sweep_of(QAbstractSpinBox* box)
{
    if (auto* s = qobject_cast<CheckedSpinBox*>(box))
        return s->sweep();
    if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(box))
        return d->sweep();
    return {};
}

} // namespace

std::vector<std::pair<std::string, QList<double>>> MethodPanel::sweptFields() const
{
    std::vector<std::pair<std::string, QList<double>>> swept;
    for (const auto& [field, box] : fieldBoxes())
        if (shown_in(box, this)) // a hidden box is not part of the request
            if (const QList<double> values = sweep_of(box); !values.isEmpty())
                swept.emplace_back(field, values);
    return swept;
}

int64_t MethodPanel::sweepSize() const
{
    int64_t runs = 1;
    for (const auto& [field, values] : sweptFields())
        runs = std::min<int64_t>(runs * values.size(), int64_t{1} << 40);
    return runs;
}

std::vector<CompressionRequest> MethodPanel::requests() const
{
    const auto swept = sweptFields();
    if (sweepSize() > kMaxSweepRuns)
        return {};
    // Every combination, the first swept field slowest (as sweep --keep-ratios x --ks).
    std::vector<CompressionRequest> out;
    std::vector<int> at(swept.size(), 0);
    while (true) {
        std::map<std::string, double> with;
        for (size_t i = 0; i < swept.size(); ++i)
            with[swept[i].first] = swept[i].second[at[i]];
        out.push_back(request(method(), with));
        int i = static_cast<int>(swept.size()) - 1;
        for (; i >= 0; --i) {
            if (++at[i] < swept[i].second.size())
                break;
            at[i] = 0;
        }
        if (i < 0)
            return out;
    }
}

void MethodPanel::run()
{
    showProblem();
    if (const QString reason = problem(); !reason.isEmpty()) {
        emit runRefused(reason); // said in place, in red, and in the status bar; nothing is queued
        return;
    }
    if (const int64_t runs = sweepSize(); runs > kConfirmSweepRuns) {
        QMessageBox ask(QMessageBox::Question, "Run a large sweep",
                        QString("This sweep queues %1 runs of %2. Run them all?").arg(runs).arg(method()),
                        QMessageBox::Yes | QMessageBox::Cancel, this);
        ask.setObjectName("confirm_sweep");
        ask.setDefaultButton(QMessageBox::Cancel);
        if (ask.exec() != QMessageBox::Yes)
            return;
    }
    emit runRequested();
}

void MethodPanel::showRuns()
{
    // The Run button counts a sweep's runs, so a typed list or range is seen to be one.
    const int64_t runs = problem().isEmpty() ? sweepSize() : 1;
    run_->setText(runs > 1 ? QString("Run %1").arg(runs) : QString("Run"));
    run_->setToolTip(runs > 1 ? QString("Queue the sweep: %1 runs, one after another (on Slurm: one job "
                                        "array), each adding its row to Results")
                                    .arg(runs)
                              : QString("Compress and evaluate (a field may hold a sweep: 8,16,32 or "
                                        "8:128:8)"));
}

} // namespace embedlab::app
