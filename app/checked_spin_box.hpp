// Spin boxes that say no. QSpinBox drops a keystroke that would leave its range,
// so "500" typed where d = 128 silently becomes 50 and runs. These keep the
// problem instead: the box is framed in red, its tooltip and problem() name the
// typed value and the range, and whoever runs the choice refuses while a visible
// box has a problem (MethodPanel::run, the Fourier and LLE updates).
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>

namespace embedlab::app {

// What both boxes do, over QSpinBox or QDoubleSpinBox (instantiated for those two
// in the .cpp). The Qt classes below (Derived) only add the problemChanged signal,
// which a template cannot declare; CheckedBox emits it.
template <class Base, class Derived> class CheckedBox : public Base {
public:
    explicit CheckedBox(QWidget* parent = nullptr);
    QString problem() const { return problem_; } // "" while the typed value is in range
    QValidator::State validate(QString& text, int& pos) const override;

private:
    void setProblem(const QString& problem) const;
    mutable QString problem_;
};

class CheckedSpinBox : public CheckedBox<QSpinBox, CheckedSpinBox> {
    Q_OBJECT
    using CheckedBox::CheckedBox; // public, as inherited constructors keep CheckedBox's access
signals:
    void problemChanged(const QString& problem);
};

class CheckedDoubleSpinBox : public CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox> {
    Q_OBJECT
    using CheckedBox::CheckedBox; // public, as inherited constructors keep CheckedBox's access
signals:
    void problemChanged(const QString& problem);
};

extern template class CheckedBox<QSpinBox, CheckedSpinBox>;
extern template class CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox>;

// The first problem among `boxes` that are visible ("" if none).
QString first_problem(const QList<QWidget*>& boxes);

} // namespace embedlab::app
